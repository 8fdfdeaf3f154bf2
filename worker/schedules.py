"""Temporal Schedules the worker makes sure exist: the retention sweep (expiry goes through Forget)."""

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

RETENTION_SCHEDULE_ID = "memwarden-retention"


async def ensure_retention_schedule(client: Client, settings: Settings) -> bool:
    """Create the retention sweep schedule if absent; True when this call created it."""
    schedule = Schedule(
        action=ScheduleActionStartWorkflow(
            RetentionWorkflow.run, id="retention-sweep", task_queue=settings.temporal_task_queue
        ),
        spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(seconds=settings.retention_sweep_seconds))]),
        policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
    )
    try:
        await client.create_schedule(RETENTION_SCHEDULE_ID, schedule)
    except ScheduleAlreadyRunningError:
        return False
    return True
