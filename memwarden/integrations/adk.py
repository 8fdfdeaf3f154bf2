"""A Google ADK `BaseMemoryService` over memwarden's HTTP API: a session's user turns go through the gate.

    memory = MemwardenMemoryService("http://127.0.0.1:8080", tokens=lambda app, user: token_for(app, user))
    runner = Runner(agent=agent, app_name="helpdesk", session_service=sessions, memory_service=memory)

`tokens(app_name, user_id)` returns the bearer token of the agent serving that user (role `agent`,
`on_behalf_of` the user): ADK passes the user on every call, memwarden takes it only from the token.
A fixed `token` works for one user; a call for any other user is then refused before it is sent.

- `add_session_to_memory` / `add_events_to_memory`: each event the user authored becomes one candidate
  (its text; the agent's own replies are model output and never become memory), with the session and
  the turn (the event's invocation) as provenance and the event id as the idempotency key, so adding a
  session again proposes nothing twice. ADK's signature returns nothing: `ingest` returns each event's
  decision. The gate's decisions never raise (a secret in a conversation must not stop the agent;
  pending writes wait for the person on /me), nor does an event the API refuses as input (too long:
  `INVALID`); a token that may not write, or a service that does not answer, raises.
- `search_memory`: memwarden's search under the token (authorization before ranking); each hit is a
  `MemoryEntry` whose `custom_metadata` carries memwarden's label, freshness, type and score. Its text
  is the label line, then the memory quoted as memwarden's context block quotes it: ADK's
  `preload_memory` puts only the text into the prompt, so the label must travel in it to say there
  that this is remembered data, possibly outdated (`labelled=False`: the bare text).
- `delete_memory`: a forget (memwarden's deletion, verified per sink); `forget` returns its id.

docs/decisions/adk-memory-service.md records why these mappings.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

try:
    from google.adk.events.event import Event
    from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
    from google.adk.memory.memory_entry import MemoryEntry
    from google.adk.sessions.session import Session
    from google.genai import types
except ImportError as error:  # pragma: no cover - exercised in a subprocess without google-adk
    raise ImportError("memwarden.integrations.adk needs Google ADK: pip install 'memwarden[adk]'") from error

from memwarden.integrations.outcomes import MemoryForbidden, MemoryInvalid
from memwarden.integrations.service import Service
from memwarden.policy.render import quoted

__all__ = ["EventOutcome", "MemwardenMemoryService"]

TokenSource = Callable[[str, str], str | Awaitable[str]]


@dataclass(frozen=True)
class EventOutcome:
    """The gate's decision on one user event: codes and ids, never its text."""

    event_id: str
    decision: str
    reason: str
    memory_id: str | None


def _served(token: str) -> str | None:
    """The user a token says it serves (`on_behalf_of`, else `sub`), read without verifying: memwarden
    verifies; this only stops a fixed token being used for another user's calls."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return None
    served = claims.get("on_behalf_of") or claims.get("sub")
    return served if isinstance(served, str) else None


def _text(event: Event) -> str:
    if event.content is None or not event.content.parts:
        return ""
    return "\n".join(part.text for part in event.content.parts if part.text and not part.thought).strip()


def _bounded(value: str, limit: int = 128) -> str:
    """An id as memwarden takes it (at most `limit` characters): longer ones become their hash."""
    return value if len(value) <= limit else "sha256:" + hashlib.sha256(value.encode()).hexdigest()


class MemwardenMemoryService(BaseMemoryService):
    """ADK's long-term memory, decided by memwarden under the token of the agent serving each user.

    `scope` is where user turns are kept: `"agent"` (default) the agent's private store about the
    user (the agent may forget it; the person sees it on /me), or `"user"` the person's own memory
    (only the person forgets it). `memory_type` is `episodic` by default: a turn is something the
    user said in a conversation, and an episode keeps its point with PII redacted, where a fact
    holding PII is refused.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        tokens: TokenSource | None = None,
        scope: str = "agent",
        memory_type: str = "episodic",
        search_k: int = 10,
        labelled: bool = True,
        timeout: float = 30.0,
    ) -> None:
        if (token is None) == (tokens is None):
            raise ValueError("pass exactly one of token (one user) or tokens (app_name, user_id -> token)")
        if scope not in ("agent", "user"):
            raise ValueError("scope is 'agent' or 'user'")
        self._base_url = base_url
        self._token = token
        self._tokens = tokens
        self._scope = scope
        self._type = memory_type
        self._k = search_k
        self._labelled = labelled
        self._timeout = timeout

    async def _service(self, app_name: str, user_id: str) -> Service:
        if self._tokens is not None:
            token = self._tokens(app_name, user_id)
            token = token if isinstance(token, str) else await token
        else:
            assert self._token is not None
            token = self._token
            if _served(token) != user_id:
                raise MemoryForbidden("user_mismatch", "this service's token does not serve that user")
        return Service(self._base_url, token, timeout=self._timeout)

    # --- writes ----------------------------------------------------------------------------------

    async def ingest(
        self, *, app_name: str, user_id: str, events: Sequence[Event], session_id: str | None = None
    ) -> list[EventOutcome]:
        """Propose each user event with text; the decisions, in order (what ADK's signature drops)."""
        service = await self._service(app_name, user_id)
        outcomes: list[EventOutcome] = []
        try:
            for event in events:
                text = _text(event)
                if event.author != "user" or not text:
                    continue
                provenance = {"turn": _bounded(event.invocation_id or event.id)}
                if session_id:
                    provenance["session"] = _bounded(session_id)
                key = _bounded(f"adk:{app_name}:{session_id or '-'}:{event.id}")
                try:
                    answer = await service.remember(
                        text,
                        type=self._type,
                        source_kind="user",
                        reason="user_stated_fact",
                        scope=self._scope,
                        provenance=provenance,
                        idempotency_key=key,
                    )
                except MemoryInvalid as error:  # this event breaks a rule (too long, ...): the others go on
                    outcomes.append(EventOutcome(event.id, "INVALID", error.code, None))
                    continue
                outcomes.append(EventOutcome(event.id, str(answer.decision), answer.reason, answer.memory_id))
        finally:
            await service.close()
        return outcomes

    async def add_session_to_memory(self, session: Session) -> None:
        await self.ingest(
            app_name=session.app_name, user_id=session.user_id, events=session.events, session_id=session.id
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        await self.ingest(app_name=app_name, user_id=user_id, events=events, session_id=session_id)

    # --- reads -----------------------------------------------------------------------------------

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        service = await self._service(app_name, user_id)
        try:
            answer = await service.search(query, k=self._k)
        finally:
            await service.close()
        memories = [
            MemoryEntry(
                id=hit.memory_id,
                content=types.Content(role="user", parts=[types.Part(text=self._entry_text(hit.label, hit.content))]),
                author="user" if hit.source_kind == "user" else str(hit.source_kind),
                timestamp=hit.created_at,
                custom_metadata={
                    "memwarden_label": hit.label,
                    "memwarden_freshness": str(hit.freshness),
                    "memwarden_type": str(hit.type),
                    "memwarden_source_kind": str(hit.source_kind),
                    "memwarden_score": hit.score,
                },
            )
            for hit in answer.results
        ]
        return SearchMemoryResponse(memories=memories)

    def _entry_text(self, label: str, content: str) -> str:
        return f"{label}\n{quoted(content)}" if self._labelled else content

    # --- forgetting ------------------------------------------------------------------------------

    async def forget(self, *, app_name: str, user_id: str, memory_id: str) -> dict[str, Any]:
        """Forget one memory (its slot chain too); memwarden's `{deletion_id, status, workflow_id}`."""
        service = await self._service(app_name, user_id)
        try:
            return await service.delete(memory_id)
        finally:
            await service.close()

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        if memory_id is None:
            raise ValueError("delete_memory needs the memory_id a search returned")
        await self.forget(app_name=app_name, user_id=user_id, memory_id=memory_id)
