"""Every workflow the worker registers (and replay tests replay), in one list."""

from workflows.conversation import ConversationWorkflow
from workflows.forget import ForgetWorkflow
from workflows.health import HealthWorkflow
from workflows.imports import ImportWorkflow
from workflows.pending import PendingWriteWorkflow
from workflows.remediation import RevertWorkflow, RollbackWorkflow
from workflows.remember import RememberWorkflow
from workflows.retention import RetentionWorkflow
from workflows.retrieve import RetrieveWorkflow
from workflows.revalidate import InvalidateWorkflow, PeriodicRevalidationWorkflow, RevalidateWorkflow
from workflows.summarize import SummarizeWorkflow

ALL_WORKFLOWS = [
    RememberWorkflow,
    ConversationWorkflow,
    PendingWriteWorkflow,
    RetrieveWorkflow,
    HealthWorkflow,
    ForgetWorkflow,
    SummarizeWorkflow,
    RetentionWorkflow,
    RevalidateWorkflow,
    InvalidateWorkflow,
    PeriodicRevalidationWorkflow,
    RevertWorkflow,
    RollbackWorkflow,
    ImportWorkflow,
]

__all__ = [
    "ALL_WORKFLOWS",
    "ConversationWorkflow",
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
    "RevertWorkflow",
    "RollbackWorkflow",
    "SummarizeWorkflow",
]
