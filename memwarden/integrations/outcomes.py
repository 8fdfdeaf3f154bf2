"""What the gate and the API decided, as typed errors every adapter raises the same way.

A framework's memory interface usually returns nothing from a write (LangGraph's `put`, ADK's
`add_session_to_memory`), so a decision other than "stored" must travel as an exception or it is
lost. The errors carry codes and ids only, never memory content, so they are safe to log.
"""

from __future__ import annotations

from typing import Any

from memwarden.client import MemwardenError


class MemwardenIntegrationError(Exception):
    """Base of every adapter error: a code a program can branch on."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class MemoryNotStored(MemwardenIntegrationError):
    """The gate did not store this value as the current one (see the subclass for why)."""

    def __init__(self, decision: str, reason: str, memory_id: str | None, message: str) -> None:
        super().__init__(reason, message)
        self.decision = decision
        self.reason = reason
        self.memory_id = memory_id


class MemoryRejected(MemoryNotStored):
    """REJECT: the gate refused the write (`reason`: secret_detected, pii_detected, low_importance, ...)."""

    def __init__(self, reason: str) -> None:
        super().__init__("REJECT", reason, None, f"memwarden rejected the write: {reason}")


class MemoryPending(MemoryNotStored):
    """PENDING: staged until the person (or the shared store's moderator) confirms `memory_id`.

    Nothing is readable until then; a confirmation makes it the current value, a decline or the end
    of the confirmation window drops it.
    """

    def __init__(self, memory_id: str, reason: str) -> None:
        super().__init__("PENDING", reason, memory_id, f"memwarden staged the write for confirmation: {reason}")


class MemoryDuplicate(MemoryNotStored):
    """NOOP: the gate judged the value the same as the live memory `memory_id`, which stays as it was."""

    def __init__(self, memory_id: str) -> None:
        super().__init__("NOOP", "duplicate", memory_id, "memwarden kept the existing memory: duplicate")


class MemoryForbidden(MemwardenIntegrationError):
    """403: the caller's token may not do this here (`code`: not_a_store_member, forbidden_role, ...)."""


class MemoryInvalid(MemwardenIntegrationError):
    """413/422: the request breaks a rule of the API; `fields` names what is at fault."""

    def __init__(self, code: str, message: str, fields: list[str]) -> None:
        super().__init__(code, message)
        self.fields = fields


class MemoryUnavailable(MemwardenIntegrationError):
    """5xx or no answer: nothing was decided; the same call may be repeated."""


def from_problem(error: MemwardenError) -> MemwardenIntegrationError:
    """The typed error for a problem+json answer (its code and fields, never its detail's text)."""
    message = f"memwarden answered {error.status} {error.code}"
    if error.status == 403:
        return MemoryForbidden(error.code, message)
    if error.status in (400, 409, 413, 422):
        return MemoryInvalid(error.code, message, [str(f) for f in error.fields if f])
    if error.status >= 500:
        return MemoryUnavailable(error.code, message)
    return MemwardenIntegrationError(error.code, message)


def raise_for_decision(answer: Any, *, current_id: str | None = None) -> None:
    """Raise the typed error for a remember answer that did not store the value as proposed.

    `current_id`: the memory the caller's key holds now; a NOOP naming it means the value is already
    there (a repeated write), which is success, not a duplicate of something else.
    """
    decision = str(answer.decision)
    if decision in ("ADD", "UPDATE"):
        return
    if decision == "REJECT":
        raise MemoryRejected(answer.reason)
    if decision == "PENDING":
        raise MemoryPending(str(answer.memory_id), answer.reason)
    if decision == "NOOP":
        if current_id is not None and answer.memory_id == current_id:
            return
        raise MemoryDuplicate(str(answer.memory_id))
    raise MemwardenIntegrationError("unknown_decision", f"memwarden answered an unknown decision {decision}")
