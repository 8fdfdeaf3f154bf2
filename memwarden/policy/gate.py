"""The write gate: may this candidate become durable memory, and as what?

Pure functions over typed inputs, in the contract's order (ARCHITECTURE.md, "Remember: the write gate");
the first step that decides, decides, and every decision carries a reason code:

1. memory switched off for the owner                     -> REJECT memory_disabled
2. screening that did not finish within its budget       -> REJECT detector_deadline (fail closed)
   source trust, the type a source may write, and the write reason that fits the source
   a source_ref citing a quarantined source record       -> REJECT source_quarantined
   tool, document or model text with any instruction or behaviour-change signal (a direction, a rule
   or policy for the agent, a claim of authority or permission, a role prefix, a command to remember)
                                                         -> REJECT untrusted_instruction
   document                                              -> REJECT document_is_knowledge
   system without a source_ref                           -> REJECT system_without_source_ref
   model inference the owner was not asked to confirm    -> REJECT model_inference_session_only
   a type the source may not write (tool: preference, procedural, summary)
                                                         -> REJECT untrusted_type (tool) / type_not_allowed_for_source
   a reason outside the configured set                   -> REJECT missing_reason
   a reason that does not fit the source (a tool claiming user_stated_fact)
                                                         -> REJECT reason_source_mismatch
3. never-store: secret_detected, failed_tool_output, then pii_detected (PII in a field other than the
   content always: only content can be redacted; in the content unless the type's PII policy redacts, or
   stages, instead)
4. importance (the caller's, else `importance.score_importance`) below the threshold -> REJECT low_importance
5. dedupe: the nearest live memory in the namespace is the same memory -> NOOP duplicate
6. conflict: the slot's live holder says something else -> UPDATE slot_value_changed (supersedes=holder);
   the holder says the same -> NOOP duplicate
7. staging -> PENDING staged_* (injection-like text from a trusted source, model inference, a lower-trust
   source overriding a higher-trust value, durable behaviour changes, inferred preferences, sensitive
   writes, shared stores)
8. otherwise ADD accepted (or the UPDATE from step 6); task-scoped guidance proposed as a preference,
   procedure or fact is added as a `task` memory (ADD task_scoped), with the task type's lifetime

Steps 1-4 need only the candidate's metadata and its screening (`precheck`); steps 5-6 need what an
activity found in the store and index (`Lookup`), so a workflow runs `precheck` first and looks up
neighbours only for candidates that can still be written. `decide` runs the whole gate again, so it is a
total function of its inputs and a replay always reaches the same decision.

Source trust, decided here (the contract leaves it open):
- user: any type but summary; reasons user_explicit_preference, user_stated_fact, task_outcome.
- app: typed and bounded: fact, episodic, task, and preference (always staged as inferred); never
  procedural, which would let an integration rewrite how the agent behaves. Reasons app_observation,
  task_outcome, operator_approved_update.
- system (a system of record): fact, preference, task, episodic, with a source_ref so it can be
  revalidated; same reasons as app.
- tool: untrusted: fact, episodic, task only, flagged untrusted, and only with tool_observation_unverified
  (rejected with untrusted_type / reason_source_mismatch otherwise, never silently coerced: the caller
  learns the rule instead of getting a memory it did not ask for).
- model: only when the owner is asked (`confirm_requested`), and then always PENDING; fact, preference,
  episodic, task (never procedural); its reason is a claim the owner's confirmation checks.
- summary / derived_summary are the service's own (summaries are derivatives, written by the summary
  pipeline, not proposed through the gate): no source may propose them.
Only tool candidates are stored flagged untrusted; a model candidate becomes the owner's once confirmed.

Dedupe and slots, decided here:
- "the same memory" is `dedupe.is_duplicate(similarity, value_conflict=...)` or equal content hashes;
  similarity alone is not enough (see `dedupe`: a changed value often scores higher than a paraphrase).
- a nearest duplicate that names *another* slot is another attribute: not a duplicate.
- a nearest duplicate elsewhere does not stop a slot update: when the candidate's slot holds a different
  value, the candidate supersedes it (step 6) rather than being dropped as a copy of some other memory.
- a lower-trust source (tool < model < app < user = system) that would supersede a higher-trust slot
  value waits for confirmation (PENDING staged_lower_trust_conflict, `supersedes` set).

Instructions, decided here:
- tool, document and model text may not direct the agent at all: any instruction signal (the screening's
  `instruction_like` or `directive`) rejects it, before anything else about the source is weighed;
- from the user, an app or a system of record, injection-like text (overriding earlier instructions,
  claims of authority or permission, policies addressed to the agent) waits for the person it is about
  (PENDING staged_instruction), never ADD; their durable directions wait too (staged_behaviour_change);
- guidance scoped to the task at hand ("for this ticket, keep the reply very short") is kept as a `task`
  memory, which expires with the task type's lifetime, rather than staged as a lasting preference; the
  person's own habits are facts (the detectors do not call them directions).

Nothing here sees content: the gate decides on metadata, detector codes and similarity scores, so its
inputs and outputs are safe for workflow history, logs and audit.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from memwarden.policy.dedupe import DEDUPE_THRESHOLD, is_duplicate
from memwarden.policy.importance import score_importance
from memwarden.policy.retention import RetentionPolicy, effective_ttl_seconds
from memwarden.records import (
    POLICY_VERSION,
    CommitInput,
    Decision,
    MemoryType,
    RememberInput,
    RememberResult,
    Scope,
    Screening,
    Sensitivity,
    SourceKind,
    Status,
    WriteReason,
    sensitivity_rank,
)


class GateReason(StrEnum):
    """Every reason code the gate can give; stable strings for audit, metrics and API answers."""

    ACCEPTED = "accepted"
    SLOT_VALUE_CHANGED = "slot_value_changed"
    DUPLICATE = "duplicate"
    MEMORY_DISABLED = "memory_disabled"
    SOURCE_QUARANTINED = "source_quarantined"
    DOCUMENT_IS_KNOWLEDGE = "document_is_knowledge"
    SYSTEM_WITHOUT_SOURCE_REF = "system_without_source_ref"
    UNTRUSTED_INSTRUCTION = "untrusted_instruction"
    DETECTOR_DEADLINE = "detector_deadline"
    TASK_SCOPED = "task_scoped"
    MODEL_INFERENCE_SESSION_ONLY = "model_inference_session_only"
    UNTRUSTED_TYPE = "untrusted_type"
    TYPE_NOT_ALLOWED_FOR_SOURCE = "type_not_allowed_for_source"
    MISSING_REASON = "missing_reason"
    REASON_SOURCE_MISMATCH = "reason_source_mismatch"
    SECRET_DETECTED = "secret_detected"
    FAILED_TOOL_OUTPUT = "failed_tool_output"
    PII_DETECTED = "pii_detected"
    LOW_IMPORTANCE = "low_importance"
    STAGED_INSTRUCTION = "staged_instruction"
    STAGED_MODEL_INFERENCE = "staged_model_inference"
    STAGED_LOWER_TRUST_CONFLICT = "staged_lower_trust_conflict"
    STAGED_BEHAVIOUR_CHANGE = "staged_behaviour_change"
    STAGED_INFERRED_PREFERENCE = "staged_inferred_preference"
    STAGED_SENSITIVE = "staged_sensitive"
    STAGED_SHARED_STORE = "staged_shared_store"


class PiiAction(StrEnum):
    """What a type's PII policy does when the detectors found direct identifiers."""

    REJECT = "reject"
    REDACT = "redact"
    """Store with the named entities replaced (the activity redacts before embedding and commit)."""
    STAGE = "stage"
    """Store only after confirmation (PENDING staged_sensitive)."""


class Confirmer(StrEnum):
    """Who settles a PENDING write: the owner, or the shared store's moderator."""

    OWNER = "owner"
    MODERATOR = "moderator"


ALL_TYPES_BUT_SUMMARY = frozenset(t for t in MemoryType if t is not MemoryType.SUMMARY)

DEFAULT_SOURCE_TYPES: dict[SourceKind, frozenset[MemoryType]] = {
    SourceKind.USER: ALL_TYPES_BUT_SUMMARY,
    SourceKind.APP: frozenset({MemoryType.FACT, MemoryType.EPISODIC, MemoryType.TASK, MemoryType.PREFERENCE}),
    SourceKind.SYSTEM: frozenset({MemoryType.FACT, MemoryType.EPISODIC, MemoryType.TASK, MemoryType.PREFERENCE}),
    SourceKind.TOOL: frozenset({MemoryType.FACT, MemoryType.EPISODIC, MemoryType.TASK}),
    SourceKind.MODEL: frozenset({MemoryType.FACT, MemoryType.EPISODIC, MemoryType.TASK, MemoryType.PREFERENCE}),
    SourceKind.DOCUMENT: frozenset(),
}
"""Which memory types each source may write (see the module docstring for why)."""

DEFAULT_REASON_SOURCES: dict[str, frozenset[SourceKind]] = {
    WriteReason.USER_EXPLICIT_PREFERENCE.value: frozenset({SourceKind.USER, SourceKind.MODEL}),
    WriteReason.USER_STATED_FACT.value: frozenset({SourceKind.USER, SourceKind.MODEL}),
    WriteReason.TASK_OUTCOME.value: frozenset({SourceKind.USER, SourceKind.APP, SourceKind.SYSTEM, SourceKind.MODEL}),
    WriteReason.APP_OBSERVATION.value: frozenset({SourceKind.APP, SourceKind.SYSTEM}),
    WriteReason.OPERATOR_APPROVED_UPDATE.value: frozenset({SourceKind.APP, SourceKind.SYSTEM}),
    WriteReason.TOOL_OBSERVATION_UNVERIFIED.value: frozenset({SourceKind.TOOL}),
    WriteReason.DERIVED_SUMMARY.value: frozenset(),
}
"""The allowed write reasons (the keys) and the sources each one fits. A reason not in the keys is
`missing_reason`; a source not in its set is `reason_source_mismatch`."""

DEFAULT_PII_ACTIONS: dict[MemoryType, PiiAction] = {
    MemoryType.PREFERENCE: PiiAction.REJECT,
    MemoryType.FACT: PiiAction.REJECT,
    MemoryType.PROCEDURAL: PiiAction.REJECT,
    MemoryType.EPISODIC: PiiAction.REDACT,
    MemoryType.TASK: PiiAction.REDACT,
    MemoryType.SUMMARY: PiiAction.REDACT,
}
"""A fact or preference *is* its value, so a phone number in one is rejected; an episode or task keeps its
point without the identifier ("emailed [EMAIL] about the invoice"), so it is redacted."""

TRUST_RANK: dict[SourceKind, int] = {
    SourceKind.DOCUMENT: 0,
    SourceKind.TOOL: 0,
    SourceKind.MODEL: 1,
    SourceKind.APP: 2,
    SourceKind.USER: 3,
    SourceKind.SYSTEM: 3,
}
"""A lower-ranked source may not silently supersede a higher-ranked slot value (contract: system of
record, then trusted provenance, then newer evidence). The owner and a system of record rank equal: the
owner may correct a system value, and revalidation settles it against the source."""

UNTRUSTED_SOURCES = frozenset({SourceKind.TOOL, SourceKind.MODEL, SourceKind.DOCUMENT})
"""Sources that may not instruct the agent: any instruction or behaviour-change signal is rejected outright
(memory poisoning goes through these)."""

TASK_SCOPED_TYPES = frozenset({MemoryType.PREFERENCE, MemoryType.PROCEDURAL, MemoryType.FACT})
"""Types that do not expire by age: task-scoped guidance proposed as one of these is stored as a `task`."""

FLAGGED_UNTRUSTED = frozenset({SourceKind.TOOL})
"""Sources whose memories are stored flagged untrusted."""

INFERRED_PREFERENCE_SOURCES = frozenset({SourceKind.APP, SourceKind.MODEL})
"""A preference from these was inferred from behaviour, not stated by the owner."""


class GatePolicy(BaseModel):
    """Every knob the gate reads, in one serialisable value the workflow receives (never reads config itself)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    importance_threshold: float = Field(default=0.3, ge=0.0, le=1.0)
    dedupe_threshold: float = Field(default=DEDUPE_THRESHOLD, gt=0.0, le=1.0)
    reason_sources: dict[str, frozenset[SourceKind]] = Field(default_factory=lambda: dict(DEFAULT_REASON_SOURCES))
    source_types: dict[SourceKind, frozenset[MemoryType]] = Field(default_factory=lambda: dict(DEFAULT_SOURCE_TYPES))
    pii_actions: dict[MemoryType, PiiAction] = Field(default_factory=lambda: dict(DEFAULT_PII_ACTIONS))
    staging_sensitivity: Sensitivity = Sensitivity.CONFIDENTIAL
    """Candidates at or above this sensitivity wait for confirmation."""
    retention: RetentionPolicy = Field(default_factory=RetentionPolicy)
    confirmation_window_seconds: int = Field(default=24 * 3600, gt=0)
    """How long a PENDING write waits for its owner (or moderator) before it is rejected."""
    version: str = POLICY_VERSION

    @field_serializer("reason_sources", "source_types")
    def _sorted_sets(self, value: dict[Any, frozenset[Any]]) -> dict[str, list[str]]:
        """Sets serialise in sorted order, so the same policy always has the same bytes."""
        return {str(k): sorted(str(v) for v in members) for k, members in sorted(value.items())}

    @classmethod
    def with_reasons(cls, allowed: Iterable[str], **knobs: Any) -> GatePolicy:
        """A policy whose allowed reasons are `allowed` (each must be a known reason), other knobs as given."""
        wanted = set(allowed)
        unknown = sorted(wanted - set(DEFAULT_REASON_SOURCES))
        if unknown:
            raise ValueError(f"unknown write reasons: {unknown}")
        reasons = {r: DEFAULT_REASON_SOURCES[r] for r in sorted(wanted)}
        return cls(reason_sources=reasons, **knobs)


DEFAULT_POLICY = GatePolicy()


class GateInput(BaseModel):
    """What the gate decides on: the candidate's metadata, its screening, and the owner's setting.

    Built by the workflow (`from_remember`); holds no content, only its length.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: MemoryType
    source_kind: SourceKind
    reason: str
    content_chars: int = Field(ge=0)
    slot: str | None = None
    has_source_ref: bool = False
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    sensitivity: Sensitivity = Sensitivity.LOW
    scope: Scope = Scope.USER
    ttl_seconds: int | None = Field(default=None, gt=0)
    screening: Screening = Field(default_factory=Screening)
    memory_enabled: bool = True
    """The owner's `memory_enabled` setting (off stops writes)."""
    source_quarantined: bool = False
    """The candidate's source_ref cites a source record that was forgotten as poisoned (Forget's `source`
    selector quarantines it): nothing may be written from it again."""
    confirm_requested: bool = False
    """The proposer will ask the owner to confirm: required for model inferences, which then go PENDING."""

    @classmethod
    def from_remember(
        cls,
        candidate: RememberInput,
        *,
        screening: Screening,
        memory_enabled: bool = True,
        source_quarantined: bool = False,
        confirm_requested: bool | None = None,
    ) -> GateInput:
        return cls(
            type=candidate.type,
            source_kind=candidate.source_kind,
            reason=candidate.reason,
            content_chars=candidate.content_chars,
            slot=candidate.slot,
            has_source_ref=candidate.source_ref is not None,
            importance=candidate.importance,
            sensitivity=candidate.sensitivity,
            scope=candidate.scope,
            ttl_seconds=candidate.ttl_seconds,
            screening=screening,
            memory_enabled=memory_enabled,
            source_quarantined=source_quarantined,
            confirm_requested=candidate.confirm_requested if confirm_requested is None else confirm_requested,
        )


class Neighbour(BaseModel):
    """A live memory in the candidate's namespace, as an activity found it: ids and scores, no content."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    memory_id: str
    similarity: float = Field(ge=-1.0, le=1.0)
    """Cosine similarity of the candidate's (redacted, if redaction applies) text and this memory's."""
    value_conflict: bool = False
    """`dedupe.value_conflict(candidate_text, memory_text)`, computed by the activity that has both."""
    same_content: bool = False
    """The content hashes are equal: the same text, whatever the similarity says."""
    slot: str | None = None
    source_kind: SourceKind | None = None
    status: Status = Status.ACTIVE


class Lookup(BaseModel):
    """What steps 5 and 6 need from the store and index."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    nearest: Neighbour | None = None
    """The most similar live memory (pending, active or stale) in the same namespace, any type."""
    slot_holder: Neighbour | None = None
    """The live holder of the candidate's slot in the same namespace; None when the candidate has no slot."""


class Screened(BaseModel):
    """What the screening activity hands the workflow: detector codes, the owner's switch, neighbours.

    Codes, ids and scores only (safe for history). `lookup` is empty when `precheck` already rejects:
    rejected text is neither embedded nor compared with anything.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    screening: Screening
    memory_enabled: bool = True
    source_quarantined: bool = False
    """Absent from histories recorded before the check existed: those runs were not quarantined."""
    lookup: Lookup = Field(default_factory=Lookup)

    def gate_input(self, candidate: RememberInput) -> GateInput:
        return GateInput.from_remember(
            candidate,
            screening=self.screening,
            memory_enabled=self.memory_enabled,
            source_quarantined=self.source_quarantined,
        )


class GateDecision(BaseModel):
    """The gate's answer. Safe for history and audit: codes, ids and numbers only."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: Decision
    reason: GateReason
    step: int = Field(ge=1, le=8)
    """The contract step that decided (1-8), for audit and metrics."""
    supersedes: str | None = None
    """UPDATE, or a PENDING that will supersede on confirmation: the slot holder to mark superseded."""
    duplicate_of: str | None = None
    """NOOP: the live memory the candidate duplicates (the answer's memory_id)."""
    redact: list[str] = Field(default_factory=list)
    """PII entity names to redact from the content before it is embedded or stored."""
    untrusted: bool = False
    """Store flagged untrusted (tool observations)."""
    importance: float | None = None
    """The importance used (the caller's, or the scorer's); None when rejected before step 4."""
    ttl_seconds: int | None = None
    """Lifetime from the type's retention policy and the caller's ttl; None: no expiry by age."""
    staging: list[GateReason] = Field(default_factory=list)
    """PENDING: every staging rule that applied (the first is `reason`)."""
    memory_type: MemoryType | None = None
    """The type the memory is stored as when the gate changed it (task-scoped guidance becomes a `task`);
    None: the candidate's own type."""
    confirm_by: Confirmer | None = None
    """PENDING: who settles it."""
    policy_version: str = POLICY_VERSION

    @property
    def writes(self) -> bool:
        """True when something will be stored (ADD, UPDATE, or PENDING awaiting confirmation)."""
        return self.decision in (Decision.ADD, Decision.UPDATE, Decision.PENDING)


def commit_input(candidate: RememberInput, decision: GateDecision) -> CommitInput:
    """The gate's adjustments that a commit or stage applies (importance, redaction, lifetime, trust)."""
    assert decision.importance is not None, "only a decision that writes has an importance"
    if decision.memory_type is not None and decision.memory_type is not candidate.type:
        candidate = candidate.model_copy(update={"type": decision.memory_type})
    return CommitInput(
        candidate=candidate,
        importance=decision.importance,
        reason=decision.reason.value,
        redact=decision.redact,
        ttl_seconds=decision.ttl_seconds,
        untrusted=decision.untrusted,
    )


class Remembered(BaseModel):
    """What the one-step Remember activity hands the workflow: the gate's decision and what became of it.

    Codes, ids and numbers only (safe for history). The workflow records both and, for a PENDING
    decision, starts the confirmation window from `decision`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    decision: GateDecision
    result: RememberResult


def _reject(
    reason: GateReason, step: int, inp: GateInput, policy: GatePolicy, importance: float | None = None
) -> GateDecision:
    return GateDecision(
        decision=Decision.REJECT,
        reason=reason,
        step=step,
        untrusted=inp.source_kind in FLAGGED_UNTRUSTED,
        importance=importance,
        policy_version=policy.version,
    )


def _source_trust(inp: GateInput, policy: GatePolicy) -> GateDecision | None:
    """Step 2: who says so, what they may write, and whether their reason fits."""
    source = inp.source_kind
    if inp.screening.deadline_exceeded:  # nothing the screening says can be relied on: fail closed
        return _reject(GateReason.DETECTOR_DEADLINE, 2, inp, policy)
    if inp.source_quarantined:  # whoever proposes it: the record it cites was poisoned
        return _reject(GateReason.SOURCE_QUARANTINED, 2, inp, policy)
    if source in UNTRUSTED_SOURCES and (inp.screening.instruction_like or inp.screening.directive):
        return _reject(GateReason.UNTRUSTED_INSTRUCTION, 2, inp, policy)
    if source is SourceKind.DOCUMENT:
        return _reject(GateReason.DOCUMENT_IS_KNOWLEDGE, 2, inp, policy)
    if source is SourceKind.SYSTEM and not inp.has_source_ref:
        return _reject(GateReason.SYSTEM_WITHOUT_SOURCE_REF, 2, inp, policy)
    if source is SourceKind.MODEL and not inp.confirm_requested:
        return _reject(GateReason.MODEL_INFERENCE_SESSION_ONLY, 2, inp, policy)
    if inp.type not in policy.source_types.get(source, frozenset()):
        code = GateReason.UNTRUSTED_TYPE if source is SourceKind.TOOL else GateReason.TYPE_NOT_ALLOWED_FOR_SOURCE
        return _reject(code, 2, inp, policy)
    fits = policy.reason_sources.get(inp.reason)
    if fits is None:
        return _reject(GateReason.MISSING_REASON, 2, inp, policy)
    if source not in fits:
        return _reject(GateReason.REASON_SOURCE_MISMATCH, 2, inp, policy)
    return None


def stored_type(inp: GateInput) -> MemoryType:
    """The type the memory is kept as: the candidate's, except that task-scoped guidance becomes a `task`."""
    if inp.screening.task_scoped and inp.type in TASK_SCOPED_TYPES:
        return MemoryType.TASK
    return inp.type


def _pii_action(inp: GateInput, policy: GatePolicy) -> PiiAction | None:
    """The PII policy that applies, or None when the detectors found no PII."""
    if not inp.screening.pii:
        return None
    return policy.pii_actions.get(stored_type(inp), PiiAction.REJECT)


def redact_entities(inp: GateInput, policy: GatePolicy = DEFAULT_POLICY) -> list[str]:
    """The PII entities to redact before the candidate is embedded (empty when nothing is redacted)."""
    if _pii_action(inp, policy) is PiiAction.REDACT:
        return sorted(set(inp.screening.pii))
    return []


def effective_importance(inp: GateInput) -> float:
    """The caller's importance, or the rule-based score when none was given."""
    if inp.importance is not None:
        return inp.importance
    return score_importance(
        memory_type=stored_type(inp),
        reason=inp.reason,
        source_kind=inp.source_kind,
        content_chars=inp.content_chars,
        has_slot=inp.slot is not None,
        screening=inp.screening,
    )


def precheck(inp: GateInput, policy: GatePolicy = DEFAULT_POLICY) -> GateDecision | None:
    """Steps 1-4 (no store or index needed): a REJECT, or None when the candidate may proceed to the lookup."""
    if not inp.memory_enabled:
        return _reject(GateReason.MEMORY_DISABLED, 1, inp, policy)
    rejected = _source_trust(inp, policy)
    if rejected is not None:
        return rejected
    if inp.screening.secrets:
        return _reject(GateReason.SECRET_DETECTED, 3, inp, policy)
    if inp.screening.failed_tool_output:
        return _reject(GateReason.FAILED_TOOL_OUTPUT, 3, inp, policy)
    if inp.screening.pii_fields or _pii_action(inp, policy) is PiiAction.REJECT:
        return _reject(GateReason.PII_DETECTED, 3, inp, policy)
    importance = effective_importance(inp)
    if importance < policy.importance_threshold:
        return _reject(GateReason.LOW_IMPORTANCE, 4, inp, policy, importance)
    return None


def _same(neighbour: Neighbour, policy: GatePolicy) -> bool:
    return neighbour.same_content or is_duplicate(
        neighbour.similarity, value_conflict=neighbour.value_conflict, threshold=policy.dedupe_threshold
    )


def _staging(inp: GateInput, policy: GatePolicy, holder: Neighbour | None) -> list[GateReason]:
    """Step 7: every rule that makes this write wait for confirmation, most fundamental first."""
    reasons: list[GateReason] = []
    if inp.screening.instruction_like:  # from a trusted source (untrusted ones were rejected at step 2)
        reasons.append(GateReason.STAGED_INSTRUCTION)
    if inp.source_kind is SourceKind.MODEL:
        reasons.append(GateReason.STAGED_MODEL_INFERENCE)
    if (
        holder is not None
        and holder.source_kind is not None
        and TRUST_RANK[inp.source_kind] < TRUST_RANK[holder.source_kind]
    ):
        reasons.append(GateReason.STAGED_LOWER_TRUST_CONFLICT)
    if inp.screening.behaviour_changing or stored_type(inp) is MemoryType.PROCEDURAL:
        reasons.append(GateReason.STAGED_BEHAVIOUR_CHANGE)
    if stored_type(inp) is MemoryType.PREFERENCE and inp.source_kind in INFERRED_PREFERENCE_SOURCES:
        reasons.append(GateReason.STAGED_INFERRED_PREFERENCE)
    if (
        sensitivity_rank(inp.sensitivity) >= sensitivity_rank(policy.staging_sensitivity)
        or _pii_action(inp, policy) is PiiAction.STAGE
    ):
        reasons.append(GateReason.STAGED_SENSITIVE)
    if inp.scope is Scope.SHARED:
        reasons.append(GateReason.STAGED_SHARED_STORE)
    return reasons


def decide(inp: GateInput, lookup: Lookup | None = None, policy: GatePolicy = DEFAULT_POLICY) -> GateDecision:
    """The whole gate, steps 1-8. `lookup` is what the store and index hold (None: nothing near, no holder)."""
    rejected = precheck(inp, policy)
    if rejected is not None:
        return rejected
    lookup = lookup or Lookup()
    importance = effective_importance(inp)
    untrusted = inp.source_kind in FLAGGED_UNTRUSTED
    holder = lookup.slot_holder if inp.slot is not None else None
    holder_differs = holder is not None and not _same(holder, policy)

    def noop(duplicate_of: str, step: int) -> GateDecision:
        return GateDecision(
            decision=Decision.NOOP,
            reason=GateReason.DUPLICATE,
            step=step,
            duplicate_of=duplicate_of,
            untrusted=untrusted,
            importance=importance,
            policy_version=policy.version,
        )

    # Step 5: a duplicate of the nearest live memory. Not when it names another slot (another attribute),
    # and not when the candidate's own slot holds a different value: then the slot must be updated (step 6).
    nearest = lookup.nearest
    if nearest is not None and _same(nearest, policy):
        other_slot = inp.slot is not None and nearest.slot is not None and nearest.slot != inp.slot
        slot_needs_update = holder_differs and holder is not None and holder.memory_id != nearest.memory_id
        if not other_slot and not slot_needs_update:
            return noop(nearest.memory_id, 5)

    # Step 6: one live value per slot.
    supersedes: str | None = None
    if holder is not None:
        if not holder_differs:
            return noop(holder.memory_id, 6)
        supersedes = holder.memory_id

    kept_as = stored_type(inp)

    def write(decision: Decision, reason: GateReason, step: int, staging: list[GateReason]) -> GateDecision:
        return GateDecision(
            decision=decision,
            reason=reason,
            step=step,
            supersedes=supersedes,
            redact=redact_entities(inp, policy),
            untrusted=untrusted,
            importance=importance,
            ttl_seconds=effective_ttl_seconds(kept_as, inp.ttl_seconds, policy.retention),
            staging=staging,
            memory_type=kept_as if kept_as is not inp.type else None,
            confirm_by=(Confirmer.MODERATOR if inp.scope is Scope.SHARED else Confirmer.OWNER) if staging else None,
            policy_version=policy.version,
        )

    # Step 7: staging.
    staging = _staging(inp, policy, holder if supersedes else None)
    if staging:
        return write(Decision.PENDING, staging[0], 7, staging)
    # Step 8: commit (the UPDATE was decided at step 6).
    if supersedes is not None:
        return write(Decision.UPDATE, GateReason.SLOT_VALUE_CHANGED, 6, [])
    if kept_as is not inp.type:
        return write(Decision.ADD, GateReason.TASK_SCOPED, 8, [])
    return write(Decision.ADD, GateReason.ACCEPTED, 8, [])
