"""The per-owner memory switch: a person may turn memory off (no writes, no reads), which deletes nothing."""

from __future__ import annotations

from datetime import datetime

from memwarden.stores.sql import statements as Q
from memwarden.stores.sql.engine import SqlEngine
from memwarden.stores.sql_models import owner_settings


class OwnerSettings(SqlEngine):
    """Reads and writes of `owner_settings`; an owner without a row has memory on."""

    async def get_settings(self, tenant_id: str, owner_id: str) -> bool:
        """Whether memory is on for this person; on unless they switched it off."""
        params = {"tenant_id": tenant_id, "owner_id": owner_id}
        value = await self._query(lambda conn: conn.scalar(Q.MEMORY_ENABLED, params), single_statement=True)
        return True if value is None else bool(value)

    async def put_settings(self, tenant_id: str, owner_id: str, memory_enabled: bool, now: datetime) -> None:
        """Switch memory on or off for a person (off stops writes and reads; it deletes nothing)."""
        stmt = self._insert(owner_settings).values(
            tenant_id=tenant_id, owner_id=owner_id, memory_enabled=memory_enabled, updated_at=now
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[owner_settings.c.tenant_id, owner_settings.c.owner_id],
            set_={"memory_enabled": stmt.excluded.memory_enabled, "updated_at": stmt.excluded.updated_at},
        )
        async with self._write() as conn:
            await conn.execute(stmt)
