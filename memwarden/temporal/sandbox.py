"""The workflow sandbox: only the pure modules pass through (no I/O, no clock, no global state).

Everything else a workflow imports (its sibling workflows, `memwarden.temporal.names`) is loaded
afresh inside each run's sandbox, so a workflow cannot reach the worker's stores or configuration
through a shared module.
"""

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

PASSTHROUGH = ("memwarden.records", "memwarden.policy", "pydantic")
"""Modules the sandbox takes from the host as they are, instead of re-importing per run."""

SANDBOX = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH))
