"""A workflow that reports the memwarden and workflows modules its sandbox holds, by object identity.

It imports `workflows.registry`, so its sandbox loads every workflow the worker registers, and
with them everything they import. Kept in a module of its own: the sandbox re-imports the module
that defines a workflow, and this one imports nothing a test module would.
"""

import sys

from temporalio import workflow

import workflows.registry  # noqa: F401  (loads every registered workflow into the sandbox)

PROBED = ("memwarden", "workflows")


@workflow.defn(name="SandboxProbe")
class SandboxProbeWorkflow:
    @workflow.run
    async def run(self) -> dict[str, int]:
        return {name: id(module) for name, module in list(sys.modules.items()) if name.split(".")[0] in PROBED}
