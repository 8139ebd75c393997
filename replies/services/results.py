"""What a person-facing operation answers, in words fit for an admin message."""

from __future__ import annotations

from dataclasses import dataclass

from conduit.statemachine import Outcome


@dataclass(frozen=True)
class Result:
    """What a person-facing operation did, in words fit for an admin message."""

    ok: bool
    message: str


def _refused(outcome: Outcome) -> Result:
    return Result(False, outcome.message)
