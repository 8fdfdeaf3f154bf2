"""Liveness and readiness: readiness checks Temporal, the store, and the index via the worker."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.problems import problem_response
from api.state import State
from workflows.health import HealthWorkflow

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


async def _check(coro: object, within: float) -> bool:
    try:
        return bool(await asyncio.wait_for(coro, within))  # type: ignore[arg-type]
    except Exception:
        return False


@router.get("/readyz", response_model=None)
async def readyz(state: State) -> JSONResponse | dict[str, object]:
    timeout = state.settings.readiness_timeout_seconds
    temporal_ok = await _check(state.temporal.service_client.check_health(), timeout)
    store_ok = await _check(state.store.ping(), timeout)
    index_ok = temporal_ok and await _check(
        state.temporal.execute_workflow(
            HealthWorkflow.run,
            id=f"health-{uuid.uuid4()}",
            task_queue=state.settings.temporal_task_queue,
            execution_timeout=timedelta(seconds=timeout),
            request_eager_start=True,
        ),
        timeout,
    )
    checks = {"temporal": temporal_ok, "store": store_ok, "index": index_ok}
    if all(checks.values()):
        return {"status": "ready", "checks": checks}
    failing = ", ".join(k for k, ok in checks.items() if not ok)
    return problem_response(503, "not_ready", f"not ready: {failing}", instance="/readyz", extra={"checks": checks})
