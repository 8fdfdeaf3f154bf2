"""What crosses into ImportWorkflow's history: an import's id, positions and counts; never a line's content.

Pure (the workflow sandbox passes memwarden.policy through), so the workflow and its tests share one
definition of a batch and of when a run continues as new.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from memwarden.policy.gate import DEFAULT_POLICY, GatePolicy
from memwarden.records import ConversationInput, ConversationResult, PendingWrite

BATCHES_PER_RUN = 25
"""Batches one ImportWorkflow run executes before it continues as new: history stays a few hundred events
whatever the file's length (each batch is one activity and its PENDING lines' child starts)."""

DECISIONS = ("ADD", "UPDATE", "NOOP", "PENDING", "REJECT", "ERROR")
"""What a line can come to: the gate's five decisions, and ERROR for a line refused before the gate
(not JSON, a field breaking its rule, a write its principal may not make, a kind not supported). A
conversation line comes to one of them too, the strongest of its candidates' (`LINE_PRECEDENCE`)."""

LINE_PRECEDENCE = ("ADD", "UPDATE", "PENDING", "REJECT", "NOOP")
"""A conversation line's decision: the first of these that one of its candidates (or withheld messages,
REJECT) came to. A line that stored something counts as stored, one that staged something as staged; a
line that changed nothing is REJECT when something of it was refused (so it is listed with the lines not
applied, by number and reason), else NOOP (duplicates, or nothing worth remembering)."""


class ImportInput(BaseModel):
    """ImportWorkflow's input: where it is in the import; the lines wait in the store (`import_lines`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    import_id: str
    tenant_id: str
    total_lines: int = Field(ge=0)
    position: int = Field(default=1, ge=1)
    """The lowest line number not yet known to be decided (1-based)."""
    batch_size: int = Field(default=128, ge=1, le=1000)
    heartbeat_seconds: int = Field(default=15, ge=1)
    policy: GatePolicy = DEFAULT_POLICY
    counts: dict[str, int] = Field(default_factory=dict)
    """Lines decided by the workflow so far, by decision (earlier runs included)."""


class ImportBatch(BaseModel):
    """One `import_batch` activity: decide up to `limit` parked lines from `position`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    import_id: str
    tenant_id: str
    position: int
    limit: int
    policy: GatePolicy
    conversations: bool = False
    """The caller runs conversation lines (ImportWorkflow past its `import-conversation-lines` patch): a
    batch that meets one parks it for ConversationWorkflow instead of reporting `unsupported_line_kind`."""


class ImportConversation(BaseModel):
    """A conversation line parked for its ConversationWorkflow: the child's id and sealed input, no text."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    line_no: int
    workflow_id: str
    request: ConversationInput


class ImportBatchResult(BaseModel):
    """What a batch did: counts by decision, where the next batch starts, and the confirmation windows to open."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    next_position: int
    done: bool
    counts: dict[str, int] = Field(default_factory=dict)
    pending: list[PendingWrite] = Field(default_factory=list)
    """Every PENDING line between `position` and `next_position` (whichever attempt committed it):
    sealed commit inputs with a subject handle, no content."""
    conversation: ImportConversation | None = None
    """The conversation line this batch stopped at (`next_position` is the line after it): its outcome is
    recorded once its ConversationWorkflow has run (`ConversationLineDone`)."""


class ConversationLineDone(BaseModel):
    """`import_conversation_line`: record a conversation line's outcome once its ConversationWorkflow ended."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    import_id: str
    tenant_id: str
    line_no: int
    result: ConversationResult | None = None
    """The child's answer (codes and ids); None when it did not give one (`failure` says why)."""
    failure: str | None = None


class LineDecided(BaseModel):
    """The line's decision as recorded (by this attempt or an earlier one)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: str


class ImportResult(BaseModel):
    import_id: str
    total_lines: int
    counts: dict[str, int]


def add_counts(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    """Counts by decision, summed."""
    return {k: a.get(k, 0) + b.get(k, 0) for k in sorted({*a, *b})}
