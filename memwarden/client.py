"""The Python client agent backends use: httpx only, typed answers, problems raised as errors."""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import BaseModel

from memwarden.records import Decision, Freshness, MemoryType, Provenance, SourceKind, SourceRef


class MemwardenError(Exception):
    """A problem+json answer: status, code and the fields at fault (never the submitted text)."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        self.code = str(problem.get("code", "error"))
        self.fields = [e.get("field") for e in problem.get("errors", []) if isinstance(e, dict)]
        super().__init__(f"{status} {self.code}: {problem.get('detail', '')}")


class RememberAnswer(BaseModel):
    decision: Decision
    reason: str
    memory_id: str | None = None
    supersedes: str | None = None
    workflow_id: str


class SearchHit(BaseModel):
    memory_id: str
    content: str
    type: MemoryType
    slot: str | None = None
    score: float
    freshness: Freshness
    source_kind: SourceKind
    source_ref: SourceRef | None = None
    created_at: str
    last_confirmed_at: str | None = None
    label: str


class SearchAnswer(BaseModel):
    results: list[SearchHit]
    withheld: list[dict[str, str]]
    context: str
    workflow_id: str


class MemoryPage(BaseModel):
    items: list[dict[str, Any]]
    next_cursor: str | None = None


class MemwardenClient:
    """One client per agent backend (or per token); `async with` closes the connection pool."""

    def __init__(
        self, base_url: str, token: str, *, timeout: float = 30.0, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=timeout, transport=transport
        )

    async def __aenter__(self) -> MemwardenClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self._http.request(method, path, **kwargs)
        if response.status_code >= 400:
            try:
                problem = response.json()
            except ValueError:
                problem = {"detail": response.reason_phrase}
            raise MemwardenError(response.status_code, problem)
        return response.json()

    async def remember(
        self,
        content: str,
        *,
        type: MemoryType | str,
        source_kind: SourceKind | str,
        reason: str,
        **fields: Any,
    ) -> RememberAnswer:
        body = {"content": content, "type": str(type), "source_kind": str(source_kind), "reason": reason, **fields}
        for name in ("source_ref", "provenance"):  # typed or as plain dicts, both as the API takes them
            if isinstance(body.get(name), SourceRef | Provenance):
                body[name] = body[name].model_dump(exclude_none=True)
        return RememberAnswer.model_validate(await self._call("POST", "/v1/memories", json=body))

    async def remember_conversation(
        self, session_id: str, messages: list[dict[str, Any]], **fields: Any
    ) -> dict[str, Any]:
        """Hand over a conversation (`[{role, content, timestamp?, turn_id?}]`); memwarden extracts what is
        worth remembering and the gate decides each candidate. Sending it again stores nothing twice."""
        body = {"session_id": session_id, "messages": messages, **fields}
        return await self._call("POST", "/v1/conversations", json=body)  # type: ignore[no-any-return]

    async def search(
        self,
        query: str,
        *,
        k: int | None = None,
        types: list[str] | None = None,
        consequence: str | None = None,
        session: str | None = None,
    ) -> SearchAnswer:
        """`session`: the conversation asking (an id), recorded with the read for blast-radius reviews."""
        body: dict[str, Any] = {"query": query}
        if session is not None:
            body["session"] = session
        if k is not None:
            body["k"] = k
        if types is not None:
            body["types"] = types
        if consequence is not None:
            body["consequence"] = consequence
        return SearchAnswer.model_validate(await self._call("POST", "/v1/search", json=body))

    async def list_memories(
        self, *, status: list[str] | None = None, limit: int | None = None, cursor: str | None = None
    ) -> MemoryPage:
        params: list[tuple[str, str | int]] = [("status", s) for s in status or []]
        if limit is not None:
            params.append(("limit", limit))
        if cursor is not None:
            params.append(("cursor", cursor))
        return MemoryPage.model_validate(await self._call("GET", "/v1/memories", params=params))

    async def get_memory(self, memory_id: str) -> dict[str, Any]:
        return await self._call("GET", f"/v1/memories/{memory_id}")  # type: ignore[no-any-return]

    async def correct(self, memory_id: str, content: str, **fields: Any) -> RememberAnswer:
        """The owner's correction (`PATCH`): a new version, gated like any write, supersedes this one.

        `fields`: `reason`, `importance`, `sensitivity`, `expected_version`, `idempotency_key`.
        """
        body = {"content": content, **fields}
        return RememberAnswer.model_validate(await self._call("PATCH", f"/v1/memories/{memory_id}", json=body))

    async def export(self, owner_id: str | None = None) -> dict[str, Any]:
        """Everything held about the subject (a user: themself; a privacy officer: `owner_id`)."""
        params = {"owner_id": owner_id} if owner_id is not None else None
        return await self._call("GET", "/v1/export", params=params)  # type: ignore[no-any-return]

    async def confirm(self, memory_id: str) -> RememberAnswer:
        """Settle a PENDING write as its owner (or the shared store's moderator): it is committed."""
        return RememberAnswer.model_validate(await self._call("POST", f"/v1/memories/{memory_id}/confirm"))

    async def decline(self, memory_id: str) -> RememberAnswer:
        """Refuse a PENDING write: it is rejected and its content dropped."""
        return RememberAnswer.model_validate(await self._call("POST", f"/v1/memories/{memory_id}/decline"))

    async def memory_enabled(self) -> bool:
        """The signed-in person's switch (off: no new memories, agents read nothing; nothing is deleted)."""
        return bool((await self._call("GET", "/v1/settings"))["memory_enabled"])

    async def set_memory_enabled(self, enabled: bool) -> bool:
        answer = await self._call("PUT", "/v1/settings", json={"memory_enabled": enabled})
        return bool(answer["memory_enabled"])

    async def delete_memory(self, memory_id: str) -> dict[str, Any]:
        """Forget one memory and its versions; returns `{deletion_id, status, workflow_id}` (202)."""
        return await self._call("DELETE", f"/v1/memories/{memory_id}")  # type: ignore[no-any-return]

    async def forget(self, selector: dict[str, Any], *, reason: str) -> dict[str, Any]:
        """Erase by selector (`{"kind": "owner", "owner_id": ...}`, ...); returns the deletion id (202)."""
        return await self._call("POST", "/v1/forget", json={"selector": selector, "reason": reason})  # type: ignore[no-any-return]

    async def deletion(self, deletion_id: str) -> dict[str, Any]:
        """The deletion's receipt: status, per-sink evidence, receipt hash."""
        return await self._call("GET", f"/v1/deletions/{deletion_id}")  # type: ignore[no-any-return]

    async def revert(self, memory_id: str) -> dict[str, Any]:
        """Undo the supersession this live version made: its predecessor's value is live again, as a new version."""
        return await self._call("POST", f"/v1/memories/{memory_id}/revert")  # type: ignore[no-any-return]

    async def release(self, memory_id: str) -> dict[str, Any]:
        """A quarantined write goes back into use (its store's moderator)."""
        return await self._call("POST", f"/v1/memories/{memory_id}/release")  # type: ignore[no-any-return]

    async def reads(self, memory_id: str) -> dict[str, Any]:
        """Who retrieved this memory, when and in how many searches (operators, the owner)."""
        return await self._call("GET", f"/v1/memories/{memory_id}/reads")  # type: ignore[no-any-return]

    async def rollback(self, selector: dict[str, Any], *, reason: str, store: str | None = None) -> dict[str, Any]:
        """Quarantine every write the selector matches (`{"kind": "writer", "writer": ..., "since": ..., "until": ...}`,
        `source`, `memories`), then restore and re-derive; returns the rollback id (202)."""
        body: dict[str, Any] = {"selector": selector, "reason": reason}
        if store is not None:
            body["store"] = store
        return await self._call("POST", "/v1/rollbacks", json=body)  # type: ignore[no-any-return]

    async def rollback_receipt(self, rollback_id: str) -> dict[str, Any]:
        """The rollback: members, per-sink evidence and, once verified, its receipt."""
        return await self._call("GET", f"/v1/rollbacks/{rollback_id}")  # type: ignore[no-any-return]

    async def pending(self, store: str, *, limit: int | None = None) -> dict[str, Any]:
        """A shared store's moderation queue, oldest first (its moderators)."""
        params = {"limit": limit} if limit is not None else None
        return await self._call("GET", f"/v1/stores/{store}/pending", params=params)  # type: ignore[no-any-return]

    async def settle_many(self, store: str, memory_ids: list[str], *, action: str = "confirm") -> dict[str, Any]:
        """Confirm or decline many pending writes of a store at once; each answers for itself."""
        body = {"action": action, "memory_ids": memory_ids}
        return await self._call("POST", f"/v1/stores/{store}/pending/settle", json=body)  # type: ignore[no-any-return]

    async def source_event(
        self, source: str, key: str, *, deleted: bool = False, version: str | None = None, event_id: str | None = None
    ) -> dict[str, Any]:
        """A system of record's change event (needs a `system` token for `source`): CloudEvents 1.0, 202."""
        import uuid

        event: dict[str, Any] = {
            "specversion": "1.0",
            "id": event_id or str(uuid.uuid4()),
            "source": source,
            "type": "memwarden.source.deleted" if deleted else "memwarden.source.changed",
            "subject": key,
        }
        if version is not None:
            event["data"] = {"version": version}
        headers = {"Content-Type": "application/cloudevents+json"}
        return await self._call("POST", "/v1/events", json=event, headers=headers)  # type: ignore[no-any-return]

    async def ready(self) -> dict[str, Any]:
        return await self._call("GET", "/readyz")  # type: ignore[no-any-return]
