"""Screening of memory candidates: secrets, PII, instruction-like text, directions to the agent, failed tool output.

`screen(content, source_kind=..., fields=...)` returns a `memwarden.records.Screening`: codes only, never
the matched text, so it is safe for workflow history, logs and audit events. The write gate decides on
it (ARCHITECTURE.md, "Remember: the write gate"); this package decides nothing itself. Every detector
runs over the content and over every other free-text field the memory carries (`free_text_fields`:
the slot, the source_ref's key and version, the provenance's session, turn, span, speaker and writer),
since all of them are returned to agents.

Libraries: detect-secrets' plugins (in memory, `secrets.py`), presidio-analyzer's pattern
recognizers on a no-op NLP engine, offline (`pii.py`). The instruction-like detector is ours
(`instructions.py`): a weighted ensemble of signals, not one regex; so are the directions
(`signals.py`). All of them match on one normalised view (`_text.normalise`: invisible characters
stripped, look-alikes folded). Everything heavy is built once, lazily; call `warm_up()` when the
worker starts so the first candidate does not pay ~1 s.

Time: no detector is super-linear in its input, and one screening has a budget (`budget_s`) shared by
all its detectors, checked between them and, for ours, inside every regex call. Most patterns need some
word to match; `_prefilter` reads those words off each pattern and skips the patterns whose words a text
lacks, so an adversarial shape at the maximum size costs a few milliseconds, not tens. Past it, `screen`
returns `Screening(deadline_exceeded=True)` and the gate rejects (`detector_deadline`): a hostile
input costs at most the budget, never a stalled request. Detectors are CPU-bound Python: callers on an
event loop use `screen_async`, which runs them in a worker thread.

Failure policy: if a detector raises, `screen` raises `DetectionError` carrying the detector's name
and the exception type only (the original exception, whose message might quote content, is not
chained). Callers must treat that as "not screened" and fail closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import TypeVar

from memwarden.detect._text import Deadline, DeadlineExceeded, normalise
from memwarden.detect._text import warm_up as _warm_text
from memwarden.detect.instructions import InstructionVerdict, assess
from memwarden.detect.instructions import warm_up as _warm_instructions
from memwarden.detect.pii import ENTITY_CATEGORY, PiiFinding, PiiType, find_pii, redact
from memwarden.detect.pii import warm_up as _warm_pii
from memwarden.detect.secrets import find_secrets
from memwarden.detect.secrets import warm_up as _warm_secrets
from memwarden.detect.signals import (
    Directions,
    directions,
    is_behaviour_changing,
    is_failed_tool_output,
    names_an_address,
)
from memwarden.detect.signals import warm_up as _warm_signals
from memwarden.records import RememberInput, Screening, SourceKind, content_hash

__all__ = [
    "DEFAULT_BUDGET_S",
    "ENTITY_CATEGORY",
    "DetectionError",
    "Directions",
    "InstructionVerdict",
    "PiiFinding",
    "PiiType",
    "assess",
    "content_hash",
    "directions",
    "find_pii",
    "find_secrets",
    "free_text_fields",
    "is_behaviour_changing",
    "is_failed_tool_output",
    "pii_codes",
    "redact",
    "screen",
    "screen_async",
    "warm_up",
]

DEFAULT_BUDGET_S = 0.5
"""CPU time one screening may take, all detectors and fields together (`_text.Deadline`; a wall-clock cap
well above it bounds waiting). A content of the maximum size in the most adversarial shape takes a few tens
of milliseconds here: the budget leaves room for a loaded machine, and bounds what a hostile input can cost."""

IDENTITY_FIELDS = frozenset({"provenance.writer"})
"""Fields that hold an identity (often an e-mail address, by design): screened for everything but PII."""

DIRECTION_SIGNALS = frozenset({"persistent_directive", "response_hijack", "directive_to_ai"})
"""Instruction signals that are just how people direct their own agent ("always reply in French", "you should
always..."): when the directions detector reads the text as a direction and nothing else fired, it is judged
as a direction (staged if durable, a task if scoped), not as an injection. `directive` still refuses it from
a tool."""

_ADDRESS_TYPES = frozenset({PiiType.STREET_ADDRESS, PiiType.EMAIL})
"""Addresses stage a write (a new delivery or contact address changes what the agent does)."""

T = TypeVar("T")


class DetectionError(RuntimeError):
    """A detector failed. Holds the detector name and exception type: never the content or its message."""

    def __init__(self, detector: str, error_type: str) -> None:
        super().__init__(f"detector {detector} failed ({error_type})")
        self.detector = detector
        self.error_type = error_type


def _run(detector: str, fn: Callable[[], T], deadline: Deadline) -> T:
    deadline.detector = detector
    deadline.check()
    failure: str | None = None
    try:
        result = fn()
    except DeadlineExceeded:
        raise
    except Exception as exc:  # re-raised below without the original (its message may quote content)
        failure = type(exc).__name__
    else:
        deadline.check()  # a detector that could not be interrupted still may not hand back a late answer
        return result
    raise DetectionError(detector, failure or "Exception")


def pii_codes(content: str) -> list[str]:
    """PII categories in `content`, also looking through zero-width and look-alike characters."""
    findings = find_pii(content)
    view = normalise(content)
    if view != content:
        findings = findings + find_pii(view)
    return sorted({f.category.value for f in findings})


def free_text_fields(candidate: RememberInput) -> dict[str, str]:
    """Every free-text field of a candidate other than its content, by dotted name (empty ones left out)."""
    fields: dict[str, str | None] = {"slot": candidate.slot}
    ref = candidate.source_ref
    if ref is not None:
        fields.update({"source_ref.system": ref.system, "source_ref.key": ref.key, "source_ref.version": ref.version})
    prov = candidate.provenance
    fields.update(
        {
            "provenance.session": prov.session,
            "provenance.turn": prov.turn,
            "provenance.span": prov.span,
            "provenance.speaker": prov.speaker,
            "provenance.writer": prov.writer,
        }
    )
    return {name: value for name, value in fields.items() if value}


def _screen(content: str, kind: SourceKind, fields: Mapping[str, str], deadline: Deadline) -> Screening:
    secrets = set(_run("secrets", lambda: find_secrets(content), deadline))
    pii = set(_run("pii", lambda: pii_codes(content), deadline))
    verdict = _run("instructions", lambda: assess(content, deadline), deadline)
    told = _run("directions", lambda: directions(content), deadline)
    # The directions just read decide it, so they are not read a second time.
    behaviour = told.durable or _run("behaviour", lambda: names_an_address(content), deadline)
    failed = _run("failed_tool_output", lambda: is_failed_tool_output(content, source_kind=kind), deadline)
    instruction_like, directive = verdict.instruction_like, verdict.directed or told.directive
    if instruction_like and told.directive and set(verdict.signals) <= DIRECTION_SIGNALS:
        instruction_like = False  # "for this ticket, always reply in French": a direction, judged as one
    signals = set(verdict.signals)
    pii_fields: list[str] = []
    if fields:
        # One pass over all fields joined (one line each), not one per field: most are short ids.
        joined = "\n".join(text for _, text in sorted(fields.items()))
        secrets.update(_run("secrets", lambda: find_secrets(joined), deadline))
        plain = {name: text for name, text in fields.items() if name not in IDENTITY_FIELDS}
        if plain and _run("pii", lambda: pii_codes("\n".join(plain.values())), deadline):
            pii_fields = [
                name for name, text in sorted(plain.items()) if _run("pii", lambda t=text: pii_codes(t), deadline)
            ]
        field_verdict = _run("instructions", lambda: assess(joined, deadline), deadline)
        field_told = _run("directions", lambda: directions(joined), deadline)
        if field_verdict.instruction_like or field_verdict.directed or field_told.directive:
            # Metadata has no business directing the agent: whatever the source, it reads as an injection.
            instruction_like = directive = True
            signals.update(field_verdict.signals or ("field_directive",))
    return Screening(
        secrets=sorted(secrets),
        pii=sorted(pii),
        instruction_like=instruction_like,
        instruction_signals=sorted(signals),
        behaviour_changing=behaviour or any(PiiType(c) in _ADDRESS_TYPES for c in pii),
        failed_tool_output=failed,
        directive=directive,
        task_scoped=told.task_scoped and not told.durable,
        pii_fields=pii_fields,
    )


def screen(
    content: str,
    *,
    source_kind: SourceKind | str,
    fields: Mapping[str, str] | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
) -> Screening:
    """Run every detector over one candidate's content and its other free-text `fields`, within `budget_s`.

    Target: < 5 ms p50 for ~200 characters after `warm_up()`. Past the budget: `deadline_exceeded` (and
    nothing else: a partial screening must not look like a clean one).
    """
    _built()  # building the detectors once is not the candidate's time: it never counts against the budget
    deadline = Deadline(budget_s)
    try:
        return _screen(content, SourceKind(source_kind), fields or {}, deadline)
    except DeadlineExceeded:
        return Screening(deadline_exceeded=True)


async def screen_async(
    content: str,
    *,
    source_kind: SourceKind | str,
    fields: Mapping[str, str] | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
) -> Screening:
    """`screen` in a worker thread: the detectors are CPU-bound and never run on the event loop."""
    return await asyncio.to_thread(screen, content, source_kind=source_kind, fields=fields, budget_s=budget_s)


@lru_cache(maxsize=1)
def _built() -> bool:
    _warm_text()
    _warm_instructions()
    _warm_signals()
    _warm_secrets()
    _warm_pii()
    return True


def warm_up() -> None:
    """Import and build everything now (look-alike tables, detect-secrets plugins, presidio, compiled patterns)."""
    _built()
    screen(
        "warm up: always reply in French; Traceback (most recent call last)",
        source_kind=SourceKind.TOOL,
        fields={"provenance.session": "warm-up"},
    )
