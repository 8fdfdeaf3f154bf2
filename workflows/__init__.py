"""Temporal workflows: deterministic orchestration only (records and policy, no I/O)."""

from workflows.health import HealthWorkflow
from workflows.pending import PendingWriteWorkflow
from workflows.remember import RememberWorkflow
from workflows.retrieve import RetrieveWorkflow

ALL_WORKFLOWS = [RememberWorkflow, PendingWriteWorkflow, RetrieveWorkflow, HealthWorkflow]

__all__ = ["ALL_WORKFLOWS", "HealthWorkflow", "PendingWriteWorkflow", "RememberWorkflow", "RetrieveWorkflow"]
