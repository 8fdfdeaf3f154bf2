"""The write gate as a decision table: candidate (+ what the store holds) -> (decision, reason code).

Rows follow the contract's numbering, and several rows pin the *order* of the steps: an earlier step
wins over a later one (disabled beats secret, secret beats low importance, low importance beats
duplicate, duplicate beats staging, ...). Importance and retention, which the gate uses, are tested at
the end.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memwarden.policy.gate import (
    DEFAULT_POLICY,
    Confirmer,
    GateDecision,
    GateInput,
    GatePolicy,
    GateReason,
    Lookup,
    Neighbour,
    PiiAction,
    decide,
    precheck,
    redact_entities,
)
from memwarden.policy.importance import score_importance
from memwarden.policy.retention import DAY_SECONDS, RetentionPolicy, effective_ttl_seconds, expires_at
from memwarden.records import (
    Decision,
    MemoryType,
    Provenance,
    RememberInput,
    Scope,
    Screening,
    Sensitivity,
    SourceKind,
    SourceRef,
    WriteReason,
)

T = MemoryType
S = SourceKind
R = WriteReason
D = Decision
G = GateReason

USER_FACT: dict[str, Any] = {"type": T.FACT, "source_kind": S.USER, "reason": R.USER_STATED_FACT, "content_chars": 40}
USER_PREF: dict[str, Any] = {**USER_FACT, "type": T.PREFERENCE, "reason": R.USER_EXPLICIT_PREFERENCE}
USER_PROC: dict[str, Any] = {**USER_PREF, "type": T.PROCEDURAL}
USER_EPISODE: dict[str, Any] = {**USER_FACT, "type": T.EPISODIC}
USER_TASK: dict[str, Any] = {**USER_FACT, "type": T.TASK, "reason": R.TASK_OUTCOME}
APP_FACT: dict[str, Any] = {**USER_FACT, "source_kind": S.APP, "reason": R.APP_OBSERVATION}
SYSTEM_FACT: dict[str, Any] = {**APP_FACT, "source_kind": S.SYSTEM, "has_source_ref": True}
TOOL_FACT: dict[str, Any] = {**USER_FACT, "source_kind": S.TOOL, "reason": R.TOOL_OBSERVATION_UNVERIFIED}
MODEL_FACT: dict[str, Any] = {**USER_FACT, "source_kind": S.MODEL, "confirm_requested": True}
DOCUMENT_FACT: dict[str, Any] = {**USER_FACT, "source_kind": S.DOCUMENT}


def scr(**kw: Any) -> Screening:
    return Screening(**kw)


SECRET = scr(secrets=["aws_access_key"])
PII = scr(pii=["EMAIL_ADDRESS"])
INSTRUCTION = scr(instruction_like=True, instruction_signals=["ignore_previous"])
FAILED = scr(failed_tool_output=True)
BEHAVIOUR = scr(behaviour_changing=True)


def near(similarity: float, memory_id: str = "m-near", **kw: Any) -> Lookup:
    return Lookup(nearest=Neighbour(memory_id=memory_id, similarity=similarity, **kw))


def held(similarity: float, memory_id: str = "m-slot", **kw: Any) -> Lookup:
    return Lookup(slot_holder=Neighbour(memory_id=memory_id, similarity=similarity, **kw))


DUP = near(0.97)
CITY = {"slot": "user.city"}
STAGE_PII = GatePolicy(pii_actions={**DEFAULT_POLICY.pii_actions, T.FACT: PiiAction.STAGE})
NO_STATED_FACT = GatePolicy.with_reasons([r.value for r in R if r is not R.USER_STATED_FACT])

# (id, candidate fields, lookup, policy, expected decision, expected reason)
ROWS: list[tuple[str, dict[str, Any], Lookup | None, GatePolicy | None, Decision, GateReason]] = [
    # 1. memory switched off: beats everything after it.
    ("disabled", {**USER_FACT, "memory_enabled": False}, None, None, D.REJECT, G.MEMORY_DISABLED),
    (
        "disabled beats secret",
        {**USER_FACT, "memory_enabled": False, "screening": SECRET},
        None,
        None,
        D.REJECT,
        G.MEMORY_DISABLED,
    ),
    ("disabled beats document", {**DOCUMENT_FACT, "memory_enabled": False}, None, None, D.REJECT, G.MEMORY_DISABLED),
    (
        "disabled beats tool instruction",
        {**TOOL_FACT, "memory_enabled": False, "screening": INSTRUCTION},
        None,
        None,
        D.REJECT,
        G.MEMORY_DISABLED,
    ),
    ("disabled beats duplicate", {**USER_FACT, "memory_enabled": False}, DUP, None, D.REJECT, G.MEMORY_DISABLED),
    (
        "disabled beats quarantined source",
        {**SYSTEM_FACT, "memory_enabled": False, "source_quarantined": True},
        None,
        None,
        D.REJECT,
        G.MEMORY_DISABLED,
    ),
    # 2. source trust. A source record forgotten as poisoned: nothing cites it again, whoever proposes.
    ("quarantined source", {**SYSTEM_FACT, "source_quarantined": True}, None, None, D.REJECT, G.SOURCE_QUARANTINED),
    (
        "quarantined source, user",
        {**USER_FACT, "has_source_ref": True, "source_quarantined": True},
        None,
        None,
        D.REJECT,
        G.SOURCE_QUARANTINED,
    ),
    (
        "quarantined beats secret and duplicate",
        {**SYSTEM_FACT, "source_quarantined": True, "screening": SECRET},
        DUP,
        None,
        D.REJECT,
        G.SOURCE_QUARANTINED,
    ),
    ("document", DOCUMENT_FACT, None, None, D.REJECT, G.DOCUMENT_IS_KNOWLEDGE),
    ("document beats secret", {**DOCUMENT_FACT, "screening": SECRET}, None, None, D.REJECT, G.DOCUMENT_IS_KNOWLEDGE),
    ("document preference", {**DOCUMENT_FACT, "type": T.PREFERENCE}, None, None, D.REJECT, G.DOCUMENT_IS_KNOWLEDGE),
    (
        "system without source_ref",
        {**SYSTEM_FACT, "has_source_ref": False},
        None,
        None,
        D.REJECT,
        G.SYSTEM_WITHOUT_SOURCE_REF,
    ),
    (
        "system without ref beats secret",
        {**SYSTEM_FACT, "has_source_ref": False, "screening": SECRET},
        None,
        None,
        D.REJECT,
        G.SYSTEM_WITHOUT_SOURCE_REF,
    ),
    ("system with source_ref", SYSTEM_FACT, None, None, D.ADD, G.ACCEPTED),
    ("system procedural", {**SYSTEM_FACT, "type": T.PROCEDURAL}, None, None, D.REJECT, G.TYPE_NOT_ALLOWED_FOR_SOURCE),
    (
        "system user_stated_fact",
        {**SYSTEM_FACT, "reason": R.USER_STATED_FACT},
        None,
        None,
        D.REJECT,
        G.REASON_SOURCE_MISMATCH,
    ),
    ("tool instruction", {**TOOL_FACT, "screening": INSTRUCTION}, None, None, D.REJECT, G.UNTRUSTED_INSTRUCTION),
    (
        "tool instruction beats secret",
        {**TOOL_FACT, "screening": scr(secrets=["jwt"], instruction_like=True)},
        None,
        None,
        D.REJECT,
        G.UNTRUSTED_INSTRUCTION,
    ),
    ("tool fact stored", TOOL_FACT, None, None, D.ADD, G.ACCEPTED),
    ("tool task stored", {**TOOL_FACT, "type": T.TASK}, None, None, D.ADD, G.ACCEPTED),
    ("tool preference", {**TOOL_FACT, "type": T.PREFERENCE}, None, None, D.REJECT, G.UNTRUSTED_TYPE),
    ("tool procedural", {**TOOL_FACT, "type": T.PROCEDURAL}, None, None, D.REJECT, G.UNTRUSTED_TYPE),
    ("tool summary", {**TOOL_FACT, "type": T.SUMMARY}, None, None, D.REJECT, G.UNTRUSTED_TYPE),
    (
        "tool claims user_stated_fact",
        {**TOOL_FACT, "reason": R.USER_STATED_FACT},
        None,
        None,
        D.REJECT,
        G.REASON_SOURCE_MISMATCH,
    ),
    ("tool unknown reason", {**TOOL_FACT, "reason": "because"}, None, None, D.REJECT, G.MISSING_REASON),
    (
        "tool type checked before reason",
        {**TOOL_FACT, "type": T.PREFERENCE, "reason": "because"},
        None,
        None,
        D.REJECT,
        G.UNTRUSTED_TYPE,
    ),
    (
        "model not confirmable",
        {**MODEL_FACT, "confirm_requested": False},
        None,
        None,
        D.REJECT,
        G.MODEL_INFERENCE_SESSION_ONLY,
    ),
    (
        "model instruction, confirmable",
        {**MODEL_FACT, "screening": INSTRUCTION},
        None,
        None,
        D.REJECT,
        G.UNTRUSTED_INSTRUCTION,
    ),
    (
        "model instruction beats session-only",
        {**MODEL_FACT, "confirm_requested": False, "screening": INSTRUCTION},
        None,
        None,
        D.REJECT,
        G.UNTRUSTED_INSTRUCTION,
    ),
    ("model confirmable fact", MODEL_FACT, None, None, D.PENDING, G.STAGED_MODEL_INFERENCE),
    (
        "model confirmable preference",
        {**MODEL_FACT, "type": T.PREFERENCE},
        None,
        None,
        D.PENDING,
        G.STAGED_MODEL_INFERENCE,
    ),
    ("model procedural", {**MODEL_FACT, "type": T.PROCEDURAL}, None, None, D.REJECT, G.TYPE_NOT_ALLOWED_FOR_SOURCE),
    (
        "model claims tool reason",
        {**MODEL_FACT, "reason": R.TOOL_OBSERVATION_UNVERIFIED},
        None,
        None,
        D.REJECT,
        G.REASON_SOURCE_MISMATCH,
    ),
    ("app fact", APP_FACT, None, None, D.ADD, G.ACCEPTED),
    ("app operator-approved fact", {**APP_FACT, "reason": R.OPERATOR_APPROVED_UPDATE}, None, None, D.ADD, G.ACCEPTED),
    ("app procedural", {**APP_FACT, "type": T.PROCEDURAL}, None, None, D.REJECT, G.TYPE_NOT_ALLOWED_FOR_SOURCE),
    (
        "app claims user_stated_fact",
        {**APP_FACT, "reason": R.USER_STATED_FACT},
        None,
        None,
        D.REJECT,
        G.REASON_SOURCE_MISMATCH,
    ),
    ("app instruction-like is not rejected", {**APP_FACT, "screening": INSTRUCTION}, None, None, D.ADD, G.ACCEPTED),
    (
        "user summary",
        {**USER_FACT, "type": T.SUMMARY, "reason": R.DERIVED_SUMMARY},
        None,
        None,
        D.REJECT,
        G.TYPE_NOT_ALLOWED_FOR_SOURCE,
    ),
    (
        "user derived_summary reason",
        {**USER_FACT, "reason": R.DERIVED_SUMMARY},
        None,
        None,
        D.REJECT,
        G.REASON_SOURCE_MISMATCH,
    ),
    ("user unknown reason", {**USER_FACT, "reason": "seemed_useful"}, None, None, D.REJECT, G.MISSING_REASON),
    ("user reason not configured", USER_FACT, None, NO_STATED_FACT, D.REJECT, G.MISSING_REASON),
    (
        "user claims app_observation",
        {**USER_FACT, "reason": R.APP_OBSERVATION},
        None,
        None,
        D.REJECT,
        G.REASON_SOURCE_MISMATCH,
    ),
    ("user instruction-like is not rejected", {**USER_FACT, "screening": INSTRUCTION}, None, None, D.ADD, G.ACCEPTED),
    (
        "missing reason beats secret",
        {**USER_FACT, "reason": "x", "screening": SECRET},
        None,
        None,
        D.REJECT,
        G.MISSING_REASON,
    ),
    # 3. never-store.
    ("secret", {**USER_FACT, "screening": SECRET}, None, None, D.REJECT, G.SECRET_DETECTED),
    (
        "secret beats failed output",
        {**TOOL_FACT, "screening": scr(secrets=["pem"], failed_tool_output=True)},
        None,
        None,
        D.REJECT,
        G.SECRET_DETECTED,
    ),
    (
        "secret beats pii",
        {**USER_EPISODE, "screening": scr(secrets=["pem"], pii=["PHONE_NUMBER"])},
        None,
        None,
        D.REJECT,
        G.SECRET_DETECTED,
    ),
    (
        "secret beats low importance",
        {**USER_FACT, "importance": 0.0, "screening": SECRET},
        None,
        None,
        D.REJECT,
        G.SECRET_DETECTED,
    ),
    ("failed tool output", {**TOOL_FACT, "screening": FAILED}, None, None, D.REJECT, G.FAILED_TOOL_OUTPUT),
    (
        "failed output beats pii",
        {**TOOL_FACT, "screening": scr(failed_tool_output=True, pii=["EMAIL_ADDRESS"])},
        None,
        None,
        D.REJECT,
        G.FAILED_TOOL_OUTPUT,
    ),
    ("pii in fact", {**USER_FACT, "screening": PII}, None, None, D.REJECT, G.PII_DETECTED),
    ("pii in preference", {**USER_PREF, "screening": PII}, None, None, D.REJECT, G.PII_DETECTED),
    ("pii in procedural", {**USER_PROC, "screening": PII}, None, None, D.REJECT, G.PII_DETECTED),
    (
        "pii beats low importance",
        {**USER_FACT, "importance": 0.0, "screening": PII},
        None,
        None,
        D.REJECT,
        G.PII_DETECTED,
    ),
    ("pii in episode is redacted", {**USER_EPISODE, "screening": PII}, None, None, D.ADD, G.ACCEPTED),
    ("pii in task is redacted", {**USER_TASK, "screening": PII}, None, None, D.ADD, G.ACCEPTED),
    ("pii staged by policy", {**USER_FACT, "screening": PII}, None, STAGE_PII, D.PENDING, G.STAGED_SENSITIVE),
    # 4. importance.
    ("low importance", {**USER_FACT, "importance": 0.1}, None, None, D.REJECT, G.LOW_IMPORTANCE),
    ("importance just below", {**USER_FACT, "importance": 0.29}, None, None, D.REJECT, G.LOW_IMPORTANCE),
    ("importance at threshold", {**USER_FACT, "importance": 0.3}, None, None, D.ADD, G.ACCEPTED),
    ("scored: tool episode", {**TOOL_FACT, "type": T.EPISODIC}, None, None, D.REJECT, G.LOW_IMPORTANCE),
    (
        "scored: tiny app episode",
        {**APP_FACT, "type": T.EPISODIC, "content_chars": 5},
        None,
        None,
        D.REJECT,
        G.LOW_IMPORTANCE,
    ),
    ("scored: app episode", {**APP_FACT, "type": T.EPISODIC}, None, None, D.ADD, G.ACCEPTED),
    ("strict threshold", USER_FACT, None, GatePolicy(importance_threshold=0.9), D.REJECT, G.LOW_IMPORTANCE),
    ("low importance beats duplicate", {**USER_FACT, "importance": 0.1}, DUP, None, D.REJECT, G.LOW_IMPORTANCE),
    ("low importance beats staging", {**USER_PROC, "importance": 0.1}, None, None, D.REJECT, G.LOW_IMPORTANCE),
    # 5. dedupe.
    ("duplicate", USER_FACT, DUP, None, D.NOOP, G.DUPLICATE),
    ("duplicate at threshold", USER_FACT, near(DEFAULT_POLICY.dedupe_threshold), None, D.NOOP, G.DUPLICATE),
    ("just below threshold", USER_FACT, near(DEFAULT_POLICY.dedupe_threshold - 0.01), None, D.ADD, G.ACCEPTED),
    ("close but value differs", USER_FACT, near(0.99, value_conflict=True), None, D.ADD, G.ACCEPTED),
    ("same content hash", USER_FACT, near(0.2, same_content=True), None, D.NOOP, G.DUPLICATE),
    ("stricter dedupe policy", USER_FACT, DUP, GatePolicy(dedupe_threshold=0.99), D.ADD, G.ACCEPTED),
    ("duplicate of a pending memory", USER_FACT, near(0.95, status="pending"), None, D.NOOP, G.DUPLICATE),
    ("duplicate beats behaviour staging", USER_PROC, DUP, None, D.NOOP, G.DUPLICATE),
    ("duplicate beats shared staging", {**USER_FACT, "scope": Scope.SHARED}, DUP, None, D.NOOP, G.DUPLICATE),
    ("duplicate beats model staging", MODEL_FACT, DUP, None, D.NOOP, G.DUPLICATE),
    ("duplicate in another slot", {**USER_FACT, **CITY}, near(0.97, slot="user.birthplace"), None, D.ADD, G.ACCEPTED),
    ("unslotted duplicate, slot empty", {**USER_FACT, **CITY}, DUP, None, D.NOOP, G.DUPLICATE),
    (
        "unslotted duplicate, slot holds another value",
        {**USER_FACT, **CITY},
        Lookup(
            nearest=Neighbour(memory_id="m-near", similarity=0.97),
            slot_holder=Neighbour(memory_id="m-slot", similarity=0.6),
        ),
        None,
        D.UPDATE,
        G.SLOT_VALUE_CHANGED,
    ),
    # 6. conflict on a slot.
    ("slot value changed", {**USER_FACT, **CITY}, held(0.64), None, D.UPDATE, G.SLOT_VALUE_CHANGED),
    ("slot same text", {**USER_FACT, **CITY}, held(0.5, same_content=True), None, D.NOOP, G.DUPLICATE),
    ("slot paraphrase", {**USER_FACT, **CITY}, held(0.93), None, D.NOOP, G.DUPLICATE),
    (
        "slot near-copy, value differs",
        {**USER_FACT, **CITY},
        held(0.98, value_conflict=True),
        None,
        D.UPDATE,
        G.SLOT_VALUE_CHANGED,
    ),
    ("holder ignored without a slot", USER_FACT, held(0.6), None, D.ADD, G.ACCEPTED),
    (
        "tool over user value",
        {**TOOL_FACT, **CITY},
        held(0.6, source_kind=S.USER),
        None,
        D.PENDING,
        G.STAGED_LOWER_TRUST_CONFLICT,
    ),
    (
        "app over system value",
        {**APP_FACT, **CITY},
        held(0.6, source_kind=S.SYSTEM),
        None,
        D.PENDING,
        G.STAGED_LOWER_TRUST_CONFLICT,
    ),
    (
        "user over system value",
        {**USER_FACT, **CITY},
        held(0.6, source_kind=S.SYSTEM),
        None,
        D.UPDATE,
        G.SLOT_VALUE_CHANGED,
    ),
    (
        "system over app value",
        {**SYSTEM_FACT, **CITY},
        held(0.6, source_kind=S.APP),
        None,
        D.UPDATE,
        G.SLOT_VALUE_CHANGED,
    ),
    (
        "tool over tool value",
        {**TOOL_FACT, **CITY},
        held(0.6, source_kind=S.TOOL),
        None,
        D.UPDATE,
        G.SLOT_VALUE_CHANGED,
    ),
    (
        "slot update that changes behaviour",
        {**USER_PROC, **CITY},
        held(0.6),
        None,
        D.PENDING,
        G.STAGED_BEHAVIOUR_CHANGE,
    ),
    # 7. staging.
    ("procedural", USER_PROC, None, None, D.PENDING, G.STAGED_BEHAVIOUR_CHANGE),
    (
        "behaviour-changing preference",
        {**USER_PREF, "screening": BEHAVIOUR},
        None,
        None,
        D.PENDING,
        G.STAGED_BEHAVIOUR_CHANGE,
    ),
    ("inferred preference", {**APP_FACT, "type": T.PREFERENCE}, None, None, D.PENDING, G.STAGED_INFERRED_PREFERENCE),
    ("confidential", {**USER_FACT, "sensitivity": Sensitivity.CONFIDENTIAL}, None, None, D.PENDING, G.STAGED_SENSITIVE),
    ("restricted", {**USER_FACT, "sensitivity": Sensitivity.RESTRICTED}, None, None, D.PENDING, G.STAGED_SENSITIVE),
    ("internal is not staged", {**USER_FACT, "sensitivity": Sensitivity.INTERNAL}, None, None, D.ADD, G.ACCEPTED),
    (
        "internal staged by policy",
        {**USER_FACT, "sensitivity": Sensitivity.INTERNAL},
        None,
        GatePolicy(staging_sensitivity=Sensitivity.INTERNAL),
        D.PENDING,
        G.STAGED_SENSITIVE,
    ),
    ("shared store", {**USER_FACT, "scope": Scope.SHARED}, None, None, D.PENDING, G.STAGED_SHARED_STORE),
    (
        "model first among staging",
        {**MODEL_FACT, "type": T.PREFERENCE, "screening": BEHAVIOUR},
        None,
        None,
        D.PENDING,
        G.STAGED_MODEL_INFERENCE,
    ),
    (
        "behaviour before inferred",
        {**APP_FACT, "type": T.PREFERENCE, "screening": BEHAVIOUR},
        None,
        None,
        D.PENDING,
        G.STAGED_BEHAVIOUR_CHANGE,
    ),
    (
        "inferred before sensitive",
        {**APP_FACT, "type": T.PREFERENCE, "sensitivity": "restricted"},
        None,
        None,
        D.PENDING,
        G.STAGED_INFERRED_PREFERENCE,
    ),
    (
        "sensitive before shared",
        {**USER_FACT, "scope": Scope.SHARED, "sensitivity": "confidential"},
        None,
        None,
        D.PENDING,
        G.STAGED_SENSITIVE,
    ),
    # 8. commit.
    ("stated preference", USER_PREF, None, None, D.ADD, G.ACCEPTED),
    ("stated fact, nothing near", USER_FACT, near(0.3), None, D.ADD, G.ACCEPTED),
    ("agent-scope task", {**USER_TASK, "scope": Scope.AGENT}, None, None, D.ADD, G.ACCEPTED),
    ("user episode", USER_EPISODE, None, None, D.ADD, G.ACCEPTED),
]


@pytest.mark.parametrize(
    ("fields", "lookup", "policy", "decision", "reason"),
    [pytest.param(*row[1:], id=row[0]) for row in ROWS],
)
def test_gate_table(
    fields: dict[str, Any], lookup: Lookup | None, policy: GatePolicy | None, decision: Decision, reason: GateReason
) -> None:
    inp = GateInput(**fields)
    result = decide(inp, lookup, policy or DEFAULT_POLICY)
    assert (result.decision, result.reason) == (decision, reason)
    # precheck agrees with decide on steps 1-4, and lets everything else through.
    early = precheck(inp, policy or DEFAULT_POLICY)
    if result.step <= 4:
        assert early == result
    else:
        assert early is None


def test_table_is_big_and_covers_every_reason_code() -> None:
    assert len(ROWS) >= 60
    assert {row[5] for row in ROWS} == set(GateReason)
    assert {row[4] for row in ROWS} == set(Decision)
    assert len({row[0] for row in ROWS}) == len(ROWS)


def test_noop_names_the_duplicate_and_update_the_superseded() -> None:
    dup = decide(GateInput(**USER_FACT), near(0.95, memory_id="m-7"))
    assert dup.duplicate_of == "m-7" and dup.supersedes is None and dup.step == 5
    upd = decide(GateInput(**USER_FACT, **CITY), held(0.5, memory_id="m-old"))
    assert upd.supersedes == "m-old" and upd.duplicate_of is None and upd.step == 6
    same_slot = decide(GateInput(**USER_FACT, **CITY), held(0.99, memory_id="m-old"))
    assert same_slot.decision is D.NOOP and same_slot.duplicate_of == "m-old" and same_slot.step == 6


def test_pending_update_keeps_the_holder_to_supersede_on_confirmation() -> None:
    result = decide(GateInput(**TOOL_FACT, **CITY), held(0.5, memory_id="m-user", source_kind=S.USER))
    assert result.decision is D.PENDING
    assert result.supersedes == "m-user"
    assert result.staging == [G.STAGED_LOWER_TRUST_CONFLICT]
    assert result.confirm_by is Confirmer.OWNER


def test_pending_lists_every_staging_rule_and_who_confirms() -> None:
    result = decide(
        GateInput(
            **{**APP_FACT, "type": T.PREFERENCE}, scope=Scope.SHARED, sensitivity="confidential", screening=BEHAVIOUR
        )
    )
    assert result.staging == [
        G.STAGED_BEHAVIOUR_CHANGE,
        G.STAGED_INFERRED_PREFERENCE,
        G.STAGED_SENSITIVE,
        G.STAGED_SHARED_STORE,
    ]
    assert result.reason is G.STAGED_BEHAVIOUR_CHANGE
    assert result.confirm_by is Confirmer.MODERATOR
    assert decide(GateInput(**USER_FACT)).confirm_by is None


def test_tool_memories_are_flagged_untrusted_and_others_are_not() -> None:
    assert decide(GateInput(**TOOL_FACT)).untrusted is True
    assert decide(GateInput(**TOOL_FACT, screening=INSTRUCTION)).untrusted is True
    for fields in (USER_FACT, APP_FACT, SYSTEM_FACT, MODEL_FACT):
        assert decide(GateInput(**fields)).untrusted is False


def test_redaction_names_the_entities_only_when_the_type_redacts() -> None:
    inp = GateInput(**USER_EPISODE, screening=scr(pii=["PHONE_NUMBER", "EMAIL_ADDRESS", "PHONE_NUMBER"]))
    assert redact_entities(inp) == ["EMAIL_ADDRESS", "PHONE_NUMBER"]
    assert decide(inp).redact == ["EMAIL_ADDRESS", "PHONE_NUMBER"]
    assert decide(GateInput(**USER_EPISODE)).redact == []
    assert redact_entities(GateInput(**USER_FACT, screening=PII)) == []  # rejected, not redacted
    assert decide(GateInput(**USER_FACT, screening=PII), policy=STAGE_PII).redact == []  # staged, kept whole


def test_decisions_carry_importance_and_retention() -> None:
    task = decide(GateInput(**USER_TASK))
    assert task.ttl_seconds == 30 * DAY_SECONDS
    assert task.importance == score_importance(
        memory_type=T.TASK, reason=R.TASK_OUTCOME, source_kind=S.USER, content_chars=40
    )
    assert decide(GateInput(**USER_TASK, ttl_seconds=3600)).ttl_seconds == 3600
    assert decide(GateInput(**USER_PREF)).ttl_seconds is None
    assert decide(GateInput(**USER_FACT, importance=0.42)).importance == 0.42
    rejected_early = decide(GateInput(**DOCUMENT_FACT))
    assert rejected_early.importance is None and rejected_early.ttl_seconds is None
    low = decide(GateInput(**USER_FACT, importance=0.1))
    assert low.importance == 0.1 and low.step == 4


def test_from_remember_maps_the_workflow_input() -> None:
    candidate = RememberInput(
        memory_id="m1",
        candidate_ref="c1",
        content_hash="h",
        content_chars=57,
        tenant_id="t",
        owner_id="o",
        scope=Scope.SHARED,
        agent_id=None,
        store="team",
        type=T.FACT,
        slot="user.city",
        source_kind=S.SYSTEM,
        source_ref=SourceRef(system="hr", key="42"),
        provenance=Provenance(),
        reason=R.APP_OBSERVATION,
        importance=0.7,
        sensitivity=Sensitivity.INTERNAL,
        ttl_seconds=60,
        actor="agent:a",
    )
    inp = GateInput.from_remember(candidate, screening=BEHAVIOUR, memory_enabled=False, confirm_requested=True)
    assert inp.has_source_ref and inp.slot == "user.city" and inp.scope is Scope.SHARED
    assert (inp.content_chars, inp.importance, inp.ttl_seconds) == (57, 0.7, 60)
    assert inp.screening.behaviour_changing and not inp.memory_enabled and inp.confirm_requested
    no_ref = GateInput.from_remember(candidate.model_copy(update={"source_ref": None}), screening=Screening())
    assert decide(no_ref).reason is G.SYSTEM_WITHOUT_SOURCE_REF


def test_policy_is_serialisable_and_reasons_are_configurable() -> None:
    policy = GatePolicy.with_reasons(["user_stated_fact", "task_outcome"], importance_threshold=0.5)
    restored = GatePolicy.model_validate_json(policy.model_dump_json())
    assert restored == policy
    assert policy.model_dump_json() == GatePolicy.model_validate_json(policy.model_dump_json()).model_dump_json()
    assert decide(GateInput(**USER_PREF), policy=restored).reason is G.MISSING_REASON
    with pytest.raises(ValueError, match="unknown write reasons"):
        GatePolicy.with_reasons(["user_stated_fact", "vibes"])
    decision = decide(GateInput(**USER_TASK, screening=PII))
    assert GateDecision.model_validate_json(decision.model_dump_json()) == decision


# --- properties: every input gets exactly one coded decision, consistent with its shape -----------------

neighbours = st.builds(
    Neighbour,
    memory_id=st.sampled_from(["m1", "m2"]),
    similarity=st.floats(-1.0, 1.0),
    value_conflict=st.booleans(),
    same_content=st.booleans(),
    slot=st.none() | st.sampled_from(["user.city", "user.pet"]),
    source_kind=st.none() | st.sampled_from(list(S)),
)
inputs = st.builds(
    GateInput,
    type=st.sampled_from(list(T)),
    source_kind=st.sampled_from(list(S)),
    reason=st.sampled_from([*list(R), "nonsense"]),
    content_chars=st.integers(0, 5000),
    slot=st.none() | st.sampled_from(["user.city", "user.pet"]),
    has_source_ref=st.booleans(),
    importance=st.none() | st.floats(0.0, 1.0),
    sensitivity=st.sampled_from(list(Sensitivity)),
    scope=st.sampled_from(list(Scope)),
    ttl_seconds=st.none() | st.integers(1, 10**8),
    screening=st.builds(
        Screening,
        secrets=st.lists(st.sampled_from(["aws", "jwt"]), max_size=1),
        pii=st.lists(st.sampled_from(["EMAIL_ADDRESS", "IBAN"]), max_size=2),
        instruction_like=st.booleans(),
        behaviour_changing=st.booleans(),
        failed_tool_output=st.booleans(),
    ),
    memory_enabled=st.booleans(),
    confirm_requested=st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(inp=inputs, nearest=st.none() | neighbours, holder=st.none() | neighbours)
def test_every_decision_is_coded_and_well_formed(
    inp: GateInput, nearest: Neighbour | None, holder: Neighbour | None
) -> None:
    result = decide(inp, Lookup(nearest=nearest, slot_holder=holder))
    assert isinstance(result.reason, GateReason)
    assert result == decide(inp, Lookup(nearest=nearest, slot_holder=holder))  # deterministic
    if not inp.memory_enabled:
        assert (result.decision, result.reason) == (D.REJECT, G.MEMORY_DISABLED)
    if inp.screening.secrets and result.step > 2:
        assert result.reason is G.SECRET_DETECTED
    if result.decision is D.REJECT:
        assert result.step <= 4 and result.supersedes is None and result.duplicate_of is None and not result.redact
    if result.decision is D.NOOP:
        assert result.duplicate_of is not None and result.reason is G.DUPLICATE and result.step in (5, 6)
    if result.decision is D.UPDATE:
        assert result.supersedes is not None and inp.slot is not None
    if result.decision is D.PENDING:
        assert result.staging and result.reason is result.staging[0] and result.confirm_by is not None
    if result.writes:
        assert inp.source_kind is not S.DOCUMENT
        assert not (inp.source_kind is S.TOOL and inp.type in (T.PREFERENCE, T.PROCEDURAL))
        assert inp.source_kind is not S.MODEL or result.decision is D.PENDING
        assert result.importance is not None and result.importance >= DEFAULT_POLICY.importance_threshold
        assert result.ttl_seconds == effective_ttl_seconds(inp.type, inp.ttl_seconds)


# --- importance ---------------------------------------------------------------------------------------


def imp(**kw: Any) -> float:
    base: dict[str, Any] = {
        "memory_type": T.FACT,
        "reason": R.USER_STATED_FACT,
        "source_kind": S.USER,
        "content_chars": 40,
    }
    return score_importance(**{**base, **kw})


@pytest.mark.parametrize(
    ("kw", "expected"),
    [
        pytest.param({"memory_type": T.PREFERENCE, "reason": R.USER_EXPLICIT_PREFERENCE}, 0.85, id="stated preference"),
        pytest.param({}, 0.75, id="stated fact"),
        pytest.param(
            {"memory_type": T.EPISODIC, "reason": R.APP_OBSERVATION, "source_kind": S.APP}, 0.35, id="app episode"
        ),
        pytest.param(
            {"memory_type": T.EPISODIC, "reason": R.TOOL_OBSERVATION_UNVERIFIED, "source_kind": S.TOOL},
            0.25,
            id="tool episode",
        ),
        pytest.param({"memory_type": T.EPISODIC, "content_chars": 10}, 0.4, id="tiny user episode"),
        pytest.param({"has_slot": True}, 0.8, id="slot bonus"),
        pytest.param({"content_chars": 20}, 0.7, id="terse"),
        pytest.param({"content_chars": 4000}, 0.7, id="very long"),
        pytest.param({"reason": "custom"}, 0.5, id="unknown reason"),
        pytest.param({"screening": Screening(behaviour_changing=True)}, 0.8, id="behaviour bonus"),
        pytest.param(
            {
                "memory_type": T.PREFERENCE,
                "reason": R.USER_EXPLICIT_PREFERENCE,
                "has_slot": True,
                "screening": BEHAVIOUR,
            },
            0.95,
            id="everything in favour",
        ),
    ],
)
def test_importance_rules(kw: dict[str, Any], expected: float) -> None:
    assert imp(**kw) == expected


def test_importance_is_bounded_and_orders_sources_by_trust() -> None:
    scores = {s: imp(source_kind=s) for s in S}
    assert scores[S.USER] > scores[S.APP] > scores[S.TOOL] > scores[S.DOCUMENT]
    assert scores[S.SYSTEM] == scores[S.USER]
    floor = imp(memory_type=T.EPISODIC, reason="x", source_kind=S.DOCUMENT, content_chars=1)
    assert floor == 0.0
    for t in T:
        for s in S:
            for n in (0, 11, 12, 23, 24, 1000, 1001):
                assert 0.0 <= imp(memory_type=t, source_kind=s, content_chars=n) <= 1.0


# --- retention ----------------------------------------------------------------------------------------

CREATED = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("memory_type", "ttl", "expected"),
    [
        pytest.param(T.TASK, None, CREATED + timedelta(days=30), id="task default"),
        pytest.param(T.EPISODIC, None, CREATED + timedelta(days=180), id="episode default"),
        pytest.param(T.PREFERENCE, None, None, id="preference never"),
        pytest.param(T.FACT, None, None, id="fact never"),
        pytest.param(T.PROCEDURAL, None, None, id="procedure never"),
        pytest.param(T.SUMMARY, None, None, id="summary never"),
        pytest.param(T.TASK, 3600, CREATED + timedelta(hours=1), id="caller shortens"),
        pytest.param(T.EPISODIC, 400 * DAY_SECONDS, CREATED + timedelta(days=400), id="caller lengthens"),
        pytest.param(T.TASK, 800 * DAY_SECONDS, CREATED + timedelta(days=365), id="task capped"),
        pytest.param(T.PREFERENCE, 7 * DAY_SECONDS, CREATED + timedelta(days=7), id="caller expires a preference"),
    ],
)
def test_retention(memory_type: MemoryType, ttl: int | None, expected: datetime | None) -> None:
    assert expires_at(CREATED, memory_type, ttl) == expected


def test_retention_policy_is_configurable_and_rejects_bad_ttl() -> None:
    policy = RetentionPolicy(default_days={T.TASK: 7, T.FACT: 3650}, max_days={T.TASK: 14})
    assert expires_at(CREATED, T.TASK, None, policy) == CREATED + timedelta(days=7)
    assert expires_at(CREATED, T.TASK, 30 * DAY_SECONDS, policy) == CREATED + timedelta(days=14)
    assert expires_at(CREATED, T.FACT, None, policy) == CREATED + timedelta(days=3650)
    assert expires_at(CREATED, T.EPISODIC, None, policy) is None  # absent from the policy: no expiry
    with pytest.raises(ValueError):
        effective_ttl_seconds(T.TASK, 0)
    gate = GatePolicy(retention=policy)
    assert decide(GateInput(**USER_TASK), policy=gate).ttl_seconds == 7 * DAY_SECONDS
