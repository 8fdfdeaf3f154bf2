"""The Temporal floor for latency benchmarks: a workflow shaped as RetrieveWorkflow is, doing nothing.

Its own module, importing only temporalio, so the workflow sandbox can re-import it cheaply.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

FLOOR_ACTIVITY = "bench_noop"


@activity.defn(name=FLOOR_ACTIVITY)
async def noop(value: str) -> str:
    """Does nothing: the workflow around it measures what Temporal itself costs."""
    return value


@workflow.defn(name="BenchFloorWorkflow")
class FloorWorkflow:
    """One local activity that does nothing, eagerly started: the least a Retrieve can cost."""

    @workflow.run
    async def run(self, value: str) -> str:
        return await workflow.execute_local_activity(
            FLOOR_ACTIVITY, value, result_type=str, start_to_close_timeout=timedelta(seconds=10)
        )
