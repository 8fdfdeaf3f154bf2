"""Plain-language labels for the person's page: what a type, source, reason or status means to them.

Why a table and not the raw codes: the page is for the people whose memories these are, not for
engineers; the code is still shown beside each label so support and audit can speak the same words.
Notices after an action are chosen here from codes carried by the redirect, never from typed text.
"""

from __future__ import annotations

from dataclasses import dataclass

from memwarden.records import LIVE_STATUSES, Status

TYPES = {
    "preference": "Preference",
    "fact": "Fact",
    "episodic": "Something that happened",
    "task": "Task",
    "procedural": "How an agent should behave",
    "summary": "Summary",
}

SOURCES = {
    "user": "you said so",
    "app": "an app observed it",
    "system": "a system of record",
    "document": "a document",
    "tool": "a tool's output (unverified)",
    "model": "inferred by an AI model",
}

REASONS = {
    "user_explicit_preference": "you stated a preference",
    "user_stated_fact": "you stated a fact",
    "task_outcome": "the outcome of a task",
    "app_observation": "an app's observation",
    "operator_approved_update": "an update an operator approved",
    "tool_observation_unverified": "an unverified tool observation",
    "derived_summary": "a summary of other memories",
}

STATUSES = {
    "pending": "Waiting for your confirmation",
    "active": "In use",
    "stale": "May be out of date",
    "superseded": "Replaced by a newer version",
    "invalidated": "No longer true at its source",
    "quarantined": "Blocked (under review)",
    "expired": "Expired",
    "rejected": "Not stored (declined or not confirmed in time)",
    "tombstoned": "Being deleted",
    "purged": "Deleted",
}

SCOPES = {"user": "yours", "agent": "kept privately by an agent", "shared": "in a shared store"}

GATE_REASONS = {
    "accepted": "stored",
    "slot_value_changed": "the new version replaces the old one",
    "duplicate": "memwarden already holds the same thing",
    "memory_disabled": "memory is switched off",
    "secret_detected": "it looks like a password, key or token, which is never stored",
    "pii_detected": "it contains a direct identifier (e-mail, phone, card or account number, address)",
    "failed_tool_output": "it is the output of a failed tool call",
    "low_importance": "it was judged too unimportant to keep",
    "type_not_allowed_for_source": "this kind of memory cannot be written by a person",
    "staged_behaviour_change": "it changes how agents behave, so it waits for your confirmation",
    "staged_sensitive": "it is sensitive, so it waits for your confirmation",
    "staged_shared_store": "it is in a shared store, so the store's moderator confirms it",
    "confirmed": "confirmed",
    "declined": "declined",
}

PROBLEMS = {
    "not_live": "That memory is no longer live (it was replaced, deleted or settled meanwhile).",
    "version_conflict": "That memory changed while you were editing it. Here is the current version.",
    "not_pending": "That write is no longer waiting (it was settled, declined or its window passed).",
    "not_found": "No such memory.",
    "not_confirmer": "Only the shared store's moderator can settle that write.",
    "remember_failed": "The correction could not be completed; nothing was stored. Try again.",
    "forget_not_started": "The memory is hidden already, but deleting could not start. Delete it again.",
    "validation_failed": "That was not a valid request.",
    "nothing_to_revert": "That memory has no earlier version to go back to.",
    "predecessor_gone": "The earlier version was deleted or has expired, so it cannot come back.",
    "predecessor_quarantined": "The earlier version is blocked under review, so it cannot come back.",
    "not_owner": "Only the person this memory is about can undo its changes.",
    "revert_failed": "The change could not be undone; nothing changed. Try again.",
}


@dataclass(frozen=True)
class Notice:
    """One message at the top of the page after an action; `kind` is success, info or error."""

    kind: str
    text: str


NOTICES = {
    "switched_off": Notice(
        "info",
        "Memory is now off. Nothing new will be stored and agents read nothing. Nothing was deleted.",
    ),
    "switched_on": Notice("success", "Memory is on again."),
    "edit_blank": Notice("error", "A correction cannot be empty. To remove a memory, delete it."),
    "edit_too_long": Notice("error", "That correction is too long."),
    "revert": Notice(
        "success", "Undone. The earlier value is in use again, as a new version; the replaced one is kept as history."
    ),
}


def _why(reason: str | None) -> str:
    if not reason:
        return ""
    return f"{GATE_REASONS.get(reason, reason.replace('_', ' '))} ({reason})"


def notice_for(done: str | None, decision: str | None, reason: str | None) -> Notice | None:
    """The message for a finished action, from the codes in the redirect (None when there was none)."""
    if done is None:
        return None
    if done in NOTICES:
        return NOTICES[done]
    if done == "problem":
        return Notice("error", PROBLEMS.get(reason or "", f"That did not work ({reason})."))
    if done == "edit":
        texts = {
            "UPDATE": ("success", "Corrected. The new version replaces the old one, which is kept as history."),
            "ADD": ("success", "Saved as a new memory."),
            "NOOP": ("info", "Nothing changed: " + _why(reason) + "."),
            "PENDING": ("info", "Your correction is waiting for your confirmation: " + _why(reason) + "."),
            "REJECT": ("error", "Your correction was not stored: " + _why(reason) + ". The old version stays."),
        }
        kind, text = texts.get(decision or "", ("info", "Done."))
        return Notice(kind, text)
    if done == "confirm":
        if decision == "REJECT":
            return Notice("error", "It could not be confirmed: " + _why(reason) + ".")
        return Notice("success", "Confirmed. It is now in use.")
    if done == "decline":
        return Notice("success", "Declined. It will not be stored.")
    return None


def status_group(status: str) -> str:
    """live, pending or past: how the page groups and styles a status."""
    value = Status(status)
    if value is Status.PENDING:
        return "pending"
    if value in LIVE_STATUSES:
        return "live"
    return "past"
