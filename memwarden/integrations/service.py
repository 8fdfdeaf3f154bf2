"""The HTTP calls every adapter shares: memwarden.client under one token, problems as typed errors.

Adapters never touch the stores: they are clients of the API like any agent backend, so the token
decides what they may read and where they may write, and the gate decides every write.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx

from memwarden.client import MemwardenClient, MemwardenError, RememberAnswer, SearchAnswer
from memwarden.integrations.outcomes import MemoryUnavailable, from_problem

LIVE = ("active", "stale")
"""The statuses an adapter reads back as current values (pending writes are not memory yet)."""

PAGE = 200
"""The API's largest listing page."""


class Service:
    """One memwarden API under one bearer token, with every problem raised as an `outcomes` error."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.client = MemwardenClient(base_url, token, timeout=timeout, transport=transport)

    async def close(self) -> None:
        await self.client.close()

    async def _guard(self, call: Any) -> Any:
        try:
            return await call
        except MemwardenError as error:
            raise from_problem(error) from None
        except httpx.HTTPError as error:
            raise MemoryUnavailable("unreachable", f"memwarden did not answer ({type(error).__name__})") from None

    async def remember(self, content: str, **fields: Any) -> RememberAnswer:
        answer: RememberAnswer = await self._guard(self.client.remember(content, **fields))
        return answer

    async def search(self, query: str, **fields: Any) -> SearchAnswer:
        answer: SearchAnswer = await self._guard(self.client.search(query, **fields))
        return answer

    async def delete(self, memory_id: str) -> dict[str, Any]:
        answer: dict[str, Any] = await self._guard(self.client.delete_memory(memory_id))
        return answer

    async def deletion(self, deletion_id: str) -> dict[str, Any]:
        answer: dict[str, Any] = await self._guard(self.client.deletion(deletion_id))
        return answer

    async def live_memories(self) -> AsyncIterator[dict[str, Any]]:
        """Every current memory the token may read, newest first, past-expiry ones left out."""
        now = datetime.now(UTC)
        cursor: str | None = None
        while True:
            page = await self._guard(self.client.list_memories(status=list(LIVE), limit=PAGE, cursor=cursor))
            for item in page.items:
                expires = item.get("expires_at")
                if expires is not None and datetime.fromisoformat(expires) <= now:
                    continue
                yield item
            cursor = page.next_cursor
            if cursor is None:
                return
