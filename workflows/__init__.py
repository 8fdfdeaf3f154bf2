"""Temporal workflows: deterministic orchestration only (records and policy, no I/O)."""

from workflows.health import HealthWorkflow
from workflows.remember import RememberWorkflow
from workflows.retrieve import RetrieveWorkflow

ALL_WORKFLOWS = [RememberWorkflow, RetrieveWorkflow, HealthWorkflow]

__all__ = ["ALL_WORKFLOWS", "HealthWorkflow", "RememberWorkflow", "RetrieveWorkflow"]
