"""Temporal workflows: deterministic orchestration only (records and policy, no I/O)."""

from workflows.forget import ForgetWorkflow
from workflows.health import HealthWorkflow
from workflows.pending import PendingWriteWorkflow
from workflows.remember import RememberWorkflow
from workflows.retention import RetentionWorkflow
from workflows.retrieve import RetrieveWorkflow
from workflows.summarize import SummarizeWorkflow

ALL_WORKFLOWS = [
    RememberWorkflow,
    PendingWriteWorkflow,
    RetrieveWorkflow,
    HealthWorkflow,
    ForgetWorkflow,
    SummarizeWorkflow,
    RetentionWorkflow,
]

__all__ = [
    "ALL_WORKFLOWS",
    "ForgetWorkflow",
    "HealthWorkflow",
    "PendingWriteWorkflow",
    "RememberWorkflow",
    "RetentionWorkflow",
    "RetrieveWorkflow",
    "SummarizeWorkflow",
]
