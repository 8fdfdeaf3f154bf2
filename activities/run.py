"""The run an activity executes in, as the services' plain `Run`."""

from __future__ import annotations

from temporalio import activity

from memwarden.services.deps import Deps
from memwarden.services.run import Run, standalone


def current_run(deps: Deps) -> Run:
    """This activity's workflow run; outside an activity (a direct call) a standalone run of its own."""
    try:
        info = activity.info()
    except RuntimeError:
        return standalone(deps.new_id)
    return Run(workflow_id=info.workflow_id, run_id=info.workflow_run_id)
