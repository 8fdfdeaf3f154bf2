"""The real workflow sandbox passes through only `memwarden.records` and `memwarden.policy`.

A probe workflow, run by the worker's sandbox on the time-skipping server, lists the memwarden and
workflows modules its sandbox holds. Those that are the host's own objects were passed through; the
rest were loaded afresh for the run. Only the pure modules may be shared, and the workflows may load
nothing of memwarden beyond them and the activity names.
"""

from __future__ import annotations

import sys

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from memwarden.temporal.sandbox import SANDBOX
from tests.workflows.sandbox_probe import SandboxProbeWorkflow
from tests.workflows.test_remember_time_skipping import test_server_path

PURE = ("memwarden.records", "memwarden.policy")
RELOADED_MEMWARDEN = {"memwarden", "memwarden.temporal", "memwarden.temporal.names"}


def is_pure(name: str) -> bool:
    return any(name == pure or name.startswith(pure + ".") for pure in PURE)


async def test_only_records_and_policy_pass_through_the_sandbox() -> None:
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter, test_server_existing_path=test_server_path()
    )
    try:
        async with Worker(env.client, task_queue="tq-probe", workflows=[SandboxProbeWorkflow], workflow_runner=SANDBOX):
            seen = await env.client.execute_workflow(
                SandboxProbeWorkflow.run, id="sandbox-probe", task_queue="tq-probe"
            )
    finally:
        await env.shutdown()

    shared = {name for name, ident in seen.items() if name in sys.modules and id(sys.modules[name]) == ident}
    assert shared == {name for name in seen if is_pure(name)}, "only the pure modules may be the host's"
    assert {"memwarden.records", "memwarden.policy.gate"} <= shared
    # Workflows and the names they call activities by are loaded afresh, in every run's sandbox.
    assert {"workflows", "workflows.remember", "memwarden.temporal.names"} <= set(seen) - shared
    memwarden_reloaded = {name for name in set(seen) - shared if name.split(".")[0] == "memwarden"}
    assert memwarden_reloaded == RELOADED_MEMWARDEN, "workflows reached past records, policy and names"
