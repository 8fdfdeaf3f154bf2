"""The workflow sandbox: our pure modules pass through (they hold no I/O and no global state)."""

from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

SANDBOX = SandboxedWorkflowRunner(
    restrictions=SandboxRestrictions.default.with_passthrough_modules("memwarden", "workflows", "pydantic")
)
