"""The acceptance record read for live sending: the latest `manage.py acceptance` run and what it
allows (docs/concepts/acceptance.md#live)."""

from __future__ import annotations

from conduit.code_version import code_version
from conduit.timefmt import iso_z
from reconcile.models import AcceptanceRun


def latest_acceptance_run() -> AcceptanceRun | None:
    """The run recorded last on this deployment (its database), pass or fail, whatever code it ran."""
    return AcceptanceRun.objects.order_by("-id").first()


def acceptance_refusal(run: AcceptanceRun | None = None, *, current: str | None = None) -> str:
    """Why the acceptance record does not let a route go live now ("" when the latest run passed on
    the code version running now). `run` defaults to the latest, `current` to this process's."""
    run = latest_acceptance_run() if run is None else run
    current = code_version() if current is None else current
    if run is None:
        return "no acceptance run recorded on this deployment: run manage.py acceptance"
    if not run.passed:
        return (
            f"latest run failed (check {run.failed_check}) at {iso_z(run.finished_at)} by {run.ran_by}: "
            "correct it and run manage.py acceptance again"
        )
    if run.code_version != current:
        return (
            f"latest pass was on code version {run.code_version}, this is {current}: "
            "run manage.py acceptance on this version"
        )
    return ""


def live_route_gate(route) -> str:
    """The gate replies asks before a route goes live (registered in ReconcileConfig.ready): the
    acceptance record is the deployment's, the same for every route."""
    return acceptance_refusal()
