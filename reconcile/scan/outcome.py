"""What one page call returns, and the errors a scan refuses with."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import DatabaseError

from conduit.providers.base import PageFailure


class ScanConflict(Exception):
    """A scan with another window is active; restart it explicitly to change the window."""


@dataclass(frozen=True)
class PageOutcome:
    source: str
    run_id: int
    state: str  # staged | published | discarded | failed | lease_lost
    pages: int = 0
    staged_events: int = 0
    report_id: int | None = None
    error: PageFailure | None = None
    # Whether an external page call was made (a resumed publication makes none).
    called: bool = True


def unauthored_failure(exc: BaseException, doing: str) -> PageFailure:
    """An error no one authored, as a page failure: a stable code, never the exception's text."""
    code = "database_error" if isinstance(exc, DatabaseError) else "unexpected_error"
    return PageFailure("unauthored", code, f"{doing} raised {type(exc).__name__}")
