"""Which workflow run an operation belongs to, as plain data: services derive audit ids from it.

An activity adapter fills it from `activity.info()`; a caller outside Temporal passes its own (or lets
the service make one up with `Deps.new_id`). A retried attempt of the same run names the same run, so
the audit events it derives from it are appended once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    workflow_id: str | None
    run_id: str | None


def standalone(new_id: Callable[[], str]) -> Run:
    """A run of its own, for a call that no workflow made (a test, a tool): fresh ids, no workflow."""
    return Run(workflow_id=None, run_id=new_id())
