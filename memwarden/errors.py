"""Errors that more than one layer raises or recognises, defined once.

Temporal-free: an activity adapts them to `ApplicationError` where it must say whether a retry can help,
and a workflow's retry policy names them by their class name (`type(error).__name__`). Messages carry
ids only, never content.
"""

from __future__ import annotations


class CandidateGone(Exception):
    """The claim-checked content (or the subject handle) an operation needs is gone, and nothing was
    stored from it: there is nothing left to commit or search with."""

    def __init__(self, ref: str) -> None:
        super().__init__(f"candidate {ref} is gone")
        self.ref = ref


class DeletionMissing(LookupError):
    """The workflow names a deletion the store does not hold (never retried into success: the forget
    workflow lists it among its non-retryable error types)."""


class ImportGone(LookupError):
    """A batch names an import the store no longer holds (erased, or never created): no retry can bring
    it back, so its activity fails for good (`ApplicationError` of this type name, non-retryable)."""

    def __init__(self, import_id: str) -> None:
        super().__init__(f"import {import_id} is gone")
        self.import_id = import_id
