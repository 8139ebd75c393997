"""The foreground scan: page calls until the scan leaves `staged`, as the command and the canary run it."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Callable

from ingress.models import Source
from reconcile.lease import LeaseBusy
from reconcile.repairs import RECONCILE_ACTOR
from reconcile.scan.outcome import PageOutcome
from reconcile.scan.page import reconcile_page
from reconcile.staging import scan_limit


def scan_until_done(
    *,
    source: Source,
    trigger: str = "command",
    actor: str = RECONCILE_ACTOR,
    since: datetime | None = None,
    until: datetime | None = None,
    base_url: str | None = None,
    wait_seconds: float = 0.0,
    retry_every: float = 0.5,
    max_pages: int | None = None,
    on_page: Callable[[PageOutcome], None] | None = None,
) -> PageOutcome:
    """Page calls in the foreground until the scan leaves `staged`: its last outcome.

    While another worker holds the lease the call is retried every
    `retry_every` seconds for up to `wait_seconds`, then LeaseBusy is raised.
    ScanConflict (another window is active) is raised at once. `on_page` sees
    each staged page. A scan passes MAX_PAGES only by being discarded, so
    `max_pages` page calls (default: the page limit plus one) without an end mean something
    is wrong: RuntimeError.
    """
    max_pages = scan_limit("pages") + 1 if max_pages is None else max_pages
    deadline = time.monotonic() + wait_seconds
    calls = 0
    while calls < max_pages:
        try:
            outcome = reconcile_page(
                source=source, trigger=trigger, actor=actor, since=since, until=until, base_url=base_url
            )
        except LeaseBusy:
            if time.monotonic() >= deadline:
                raise
            time.sleep(retry_every)
            continue
        calls += 1
        if outcome.state != "staged":
            return outcome
        if on_page is not None:
            on_page(outcome)
    raise RuntimeError(f"the scan of {source.name} did not finish in {max_pages} page calls")
