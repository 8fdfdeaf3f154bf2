"""Every workflow the worker registers (and replay tests replay), in one list."""

from workflows.forget import ForgetWorkflow
from workflows.health import HealthWorkflow
from workflows.imports import ImportWorkflow
from workflows.pending import PendingWriteWorkflow
from workflows.remember import RememberWorkflow
from workflows.retention import RetentionWorkflow
from workflows.retrieve import RetrieveWorkflow
from workflows.revalidate import InvalidateWorkflow, PeriodicRevalidationWorkflow, RevalidateWorkflow
from workflows.summarize import SummarizeWorkflow

ALL_WORKFLOWS = [
    RememberWorkflow,
    PendingWriteWorkflow,
    RetrieveWorkflow,
    HealthWorkflow,
    ForgetWorkflow,
    SummarizeWorkflow,
    RetentionWorkflow,
    RevalidateWorkflow,
    InvalidateWorkflow,
    PeriodicRevalidationWorkflow,
    ImportWorkflow,
]

__all__ = [
    "ALL_WORKFLOWS",
    "ForgetWorkflow",
    "HealthWorkflow",
    "ImportWorkflow",
    "InvalidateWorkflow",
    "PendingWriteWorkflow",
    "PeriodicRevalidationWorkflow",
    "RememberWorkflow",
    "RetentionWorkflow",
    "RetrieveWorkflow",
    "RevalidateWorkflow",
    "SummarizeWorkflow",
]
