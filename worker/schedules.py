"""Temporal Schedules the worker makes sure exist at start (creating them is idempotent).

- `memwarden-retention`: the expiry sweep. Memories past `expires_at` (or past their retention
  class's age limit) become `expired` and go through Forget like any other deletion.
- `memwarden-revalidation`: periodic revalidation of volatile source-backed memories.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
)

from memwarden.config import Settings
from workflows.retention import RetentionWorkflow
from workflows.revalidate import PeriodicRevalidationWorkflow

RETENTION_SCHEDULE_ID = "memwarden-retention"
REVALIDATION_SCHEDULE_ID = "memwarden-revalidation"


async def _ensure(client: Client, schedule_id: str, schedule: Schedule) -> bool:
    try:
        await client.create_schedule(schedule_id, schedule)
    except ScheduleAlreadyRunningError:
        return False
    return True


def _every(seconds: float) -> ScheduleSpec:
    return ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=seconds))])


async def ensure_retention_schedule(client: Client, settings: Settings) -> bool:
    """Create the retention sweep schedule if absent; True when this call created it."""
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(
            RetentionWorkflow.run, id="retention-sweep", task_queue=settings.temporal_task_queue
        ),
        spec=_every(settings.retention_sweep_seconds),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )
    return await _ensure(client, RETENTION_SCHEDULE_ID, schedule)


async def ensure_revalidation_schedule(client: Client, settings: Settings) -> bool:
    """Create the periodic revalidation schedule if absent; True when this call created it."""
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(
            PeriodicRevalidationWorkflow.run, id="revalidation-sweep", task_queue=settings.temporal_task_queue
        ),
        spec=_every(settings.revalidation_sweep_seconds),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )
    return await _ensure(client, REVALIDATION_SCHEDULE_ID, schedule)


async def ensure_schedules(client: Client, settings: Settings) -> dict[str, bool]:
    """Every schedule the service relies on; which of them this call created."""
    return {
        RETENTION_SCHEDULE_ID: await ensure_retention_schedule(client, settings),
        REVALIDATION_SCHEDULE_ID: await ensure_revalidation_schedule(client, settings),
    }
