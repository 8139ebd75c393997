"""Validate and decide with the engine configured in settings."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from reconcile.decisions import evidence
from reconcile.decisions.engine import decide
from reconcile.decisions.schema import violations


class InvalidRequest(Exception):
    def __init__(self, found: list[dict[str, str]]) -> None:
        super().__init__(f"{len(found)} schema violation(s)")
        self.violations = found


def decision_make(*, request: Any) -> dict[str, Any]:
    """Raises InvalidRequest listing every violation; otherwise returns the decision."""
    found = violations(request)
    if found:
        raise InvalidRequest(found)
    return decide(
        request,
        role=settings.CONDUIT_DECISION_ROLE,
        model=evidence.load(settings.CONDUIT_EVIDENCE_MODEL),
    )
