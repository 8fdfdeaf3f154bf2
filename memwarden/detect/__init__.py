"""Screening of memory candidates: secrets, PII, instruction-like text, behaviour changes, failed tool output.

`screen(content, source_kind=...)` returns a `memwarden.records.Screening`: codes only, never the
matched text, so it is safe for workflow history, logs and audit events. The write gate decides on
it (ARCHITECTURE.md, "Remember: the write gate"); this package decides nothing itself.

Libraries: detect-secrets' plugins (in memory, `secrets.py`), presidio-analyzer's pattern
recognizers on a no-op NLP engine, offline (`pii.py`). The instruction-like detector is ours
(`instructions.py`): a weighted ensemble of signals, not one regex. Everything heavy is built once,
lazily; call `warm_up()` when the worker starts so the first candidate does not pay ~1 s.

Failure policy: if a detector raises, `screen` raises `DetectionError` carrying the detector's name
and the exception type only (the original exception, whose message might quote content, is not
chained). Callers must treat that as "not screened" and fail closed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from memwarden.detect._text import normalise
from memwarden.detect._text import warm_up as _warm_text
from memwarden.detect.instructions import InstructionVerdict, assess
from memwarden.detect.pii import ENTITY_CATEGORY, PiiFinding, PiiType, find_pii, redact
from memwarden.detect.pii import warm_up as _warm_pii
from memwarden.detect.secrets import find_secrets
from memwarden.detect.secrets import warm_up as _warm_secrets
from memwarden.detect.signals import is_behaviour_changing, is_failed_tool_output
from memwarden.records import Screening, SourceKind, content_hash

__all__ = [
    "ENTITY_CATEGORY",
    "DetectionError",
    "InstructionVerdict",
    "PiiFinding",
    "PiiType",
    "assess",
    "content_hash",
    "find_pii",
    "find_secrets",
    "is_behaviour_changing",
    "is_failed_tool_output",
    "pii_codes",
    "redact",
    "screen",
    "warm_up",
]

_ADDRESS_TYPES = frozenset({PiiType.STREET_ADDRESS, PiiType.EMAIL})
"""Addresses stage a write (a new delivery or contact address changes what the agent does)."""

T = TypeVar("T")


class DetectionError(RuntimeError):
    """A detector failed. Holds the detector name and exception type: never the content or its message."""

    def __init__(self, detector: str, error_type: str) -> None:
        super().__init__(f"detector {detector} failed ({error_type})")
        self.detector = detector
        self.error_type = error_type


def _run(detector: str, fn: Callable[[], T]) -> T:
    failure: str | None = None
    try:
        return fn()
    except Exception as exc:  # re-raised below without the original (its message may quote content)
        failure = type(exc).__name__
    raise DetectionError(detector, failure or "Exception")


def pii_codes(content: str) -> list[str]:
    """PII categories in `content`, also looking through zero-width and look-alike characters."""
    findings = find_pii(content)
    view = normalise(content)
    if view != content:
        findings = findings + find_pii(view)
    return sorted({f.category.value for f in findings})


def screen(content: str, *, source_kind: SourceKind | str) -> Screening:
    """Run every detector over one candidate. Target: < 5 ms p50 for ~200 characters after `warm_up()`."""
    kind = SourceKind(source_kind)
    secrets = _run("secrets", lambda: find_secrets(content))
    pii = _run("pii", lambda: pii_codes(content))
    verdict = _run("instructions", lambda: assess(content))
    behaviour = _run("behaviour", lambda: is_behaviour_changing(content))
    failed = _run("failed_tool_output", lambda: is_failed_tool_output(content, source_kind=kind))
    return Screening(
        secrets=secrets,
        pii=pii,
        instruction_like=verdict.instruction_like,
        instruction_signals=list(verdict.signals),
        behaviour_changing=behaviour or any(PiiType(c) in _ADDRESS_TYPES for c in pii),
        failed_tool_output=failed,
    )


def warm_up() -> None:
    """Import and build everything now (detect-secrets plugins, presidio analyzer, compiled patterns)."""
    _warm_text()
    _warm_secrets()
    _warm_pii()
    screen("warm up: always reply in French; Traceback (most recent call last)", source_kind=SourceKind.TOOL)
