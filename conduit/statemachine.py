"""Declared transition tables and the one transition function every ledger uses.

A ledger model has a state field; its history model records every move with
the owning ledger, prior state, next state, time, actor and reason code. A move
outside the declared table is refused, and the refusal is itself appended to
the history, so callers must not roll it back: `transition` never raises for a
refused move, it returns the outcome and leaves the decision to the caller.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Sequence

from django.db import models, transaction
from django.utils import timezone

from conduit.sql import Unsupported, insert_rows, update_rows


class TransitionRefused(Exception):
    """An undeclared move was asked for; the refusal is already recorded."""

    def __init__(self, outcome: "Outcome") -> None:
        super().__init__(outcome.message)
        self.outcome = outcome


@dataclass(frozen=True)
class TransitionTable:
    ledger: str
    moves: frozenset[tuple[str | None, str]]

    @classmethod
    def declare(cls, ledger: str, moves: Iterable[tuple[str | None, str]]) -> "TransitionTable":
        return cls(ledger=ledger, moves=frozenset(moves))

    def allows(self, prior: str | None, nxt: str) -> bool:
        return (prior, nxt) in self.moves


@dataclass(frozen=True)
class Outcome:
    ledger: str
    applied: bool
    prior: str | None
    next: str
    reason_code: str
    at: datetime

    @property
    def message(self) -> str:
        if self.applied:
            return f"{self.ledger}: {self.prior} -> {self.next} ({self.reason_code})"
        return (
            f"{self.ledger}: the move {self.prior} -> {self.next} is not in the declared "
            f"transition table; the record stays {self.prior}"
        )

    def raise_if_refused(self) -> "Outcome":
        if not self.applied:
            raise TransitionRefused(self)
        return self


class TransitionRecord(models.Model):
    """Append-only history row shared in shape by every ledger."""

    ledger = models.CharField(max_length=32, editable=False)
    prior_state = models.CharField(max_length=32, null=True, blank=True, editable=False)
    next_state = models.CharField(max_length=32, editable=False)
    at = models.DateTimeField(editable=False)
    actor = models.CharField(max_length=150, editable=False)
    reason_code = models.CharField(max_length=64, editable=False)
    refused = models.BooleanField(default=False, editable=False)

    class Meta:
        abstract = True
        ordering = ["id"]

    def __str__(self) -> str:
        verdict = "REFUSED " if self.refused else ""
        return f"{verdict}{self.prior_state or '(created)'} -> {self.next_state} by {self.actor} ({self.reason_code})"


def history_columns(owner_field: str) -> list[str]:
    return [
        f"{owner_field}_id",
        "ledger",
        "prior_state",
        "next_state",
        "at",
        "actor",
        "reason_code",
        "refused",
    ]


def _update(model: type[models.Model], where: dict, assign: dict) -> int:
    """One UPDATE through the thin path, or the ORM for what that path does not take."""
    try:
        return update_rows(model, where=where, assign=assign)
    except Unsupported:
        pk = where.pop("pk")
        return model.objects.filter(pk=pk, **where).update(**assign)


def record_created(
    *,
    table: TransitionTable,
    history: type[TransitionRecord],
    owner_field: str,
    owner_ids: Iterable[int],
    path: Sequence[str],
    actor: str,
    reason_codes: Sequence[str],
    at: datetime | None = None,
) -> None:
    """Append the history of rows just inserted in the last state of `path`.

    `path` is the creation move and any moves made before the row was first
    written (ingest inserts a record already RECORD_READY through RECEIVED);
    every step must be in the table, so creation obeys the same declared moves
    as `transition`. One reason code per step.
    """
    insert_rows(
        history,
        history_columns(owner_field),
        creation_rows(
            table=table,
            records=[(owner_id, path, reason_codes) for owner_id in owner_ids],
            actor=actor,
            at=at or timezone.now(),
        ),
    )


def creation_rows(
    *,
    table: TransitionTable,
    records: Iterable[tuple[Any, Sequence[str], Sequence[str]]],
    actor: str,
    at: datetime,
) -> list[tuple]:
    """The history rows (history_columns order) of records created along their paths, each step
    checked against the table; the owner is whatever the caller gives (an id, or a key a
    statement resolves to the id)."""
    rows = []
    for owner, path, reason_codes in records:
        steps = list(zip([None, *path[:-1]], path))
        refused = [f"{p} -> {n}" for p, n in steps if not table.allows(p, n)]
        if refused or len(reason_codes) != len(steps):
            raise ValueError(f"{table.ledger}: undeclared creation path {refused or list(path)}")
        rows += [
            (owner, table.ledger, prior, nxt, at, actor, reason, False)
            for (prior, nxt), reason in zip(steps, reason_codes)
        ]
    return rows


def transition(
    *,
    table: TransitionTable,
    model: type[models.Model],
    history: type[TransitionRecord],
    owner_field: str,
    pk: int,
    to: str,
    actor: str,
    reason_code: str,
    state_field: str = "state",
    expected: str | None = None,
    where: dict | None = None,
    extra: dict | None = None,
    at: datetime | None = None,
    record_lost_race: bool = True,
) -> Outcome:
    """Move one ledger row to `to` if the table allows it; record either way.

    With `expected`, the move is a compare-and-set UPDATE ... WHERE state =
    expected (one round trip, no lock held beyond the statement's). Without it,
    the row is locked with SELECT ... FOR NO KEY UPDATE and its state read.
    `where` adds conditions to that UPDATE and `extra` other columns to set.
    A compare-and-set that finds the row moved on (a claim lost to another
    worker) is recorded as refused unless `record_lost_race` is False: a lost
    race is not an attempted undeclared move, and the winner's history says it all.
    """
    at = at or timezone.now()
    # No savepoint: inside an ingest or admin transaction the move and its
    # history commit or roll back with the caller's work.
    with transaction.atomic(savepoint=False):
        if expected is not None and table.allows(expected, to):
            changed = _update(
                model, {"pk": pk, state_field: expected, **(where or {})}, {state_field: to, **(extra or {})}
            )
            prior = expected
            if not changed:
                prior = model.objects.filter(pk=pk).values_list(state_field, flat=True).first()
                applied = False
                if not record_lost_race:
                    return Outcome(
                        ledger=table.ledger,
                        applied=False,
                        prior=prior,
                        next=to,
                        reason_code=reason_code,
                        at=at,
                    )
            else:
                applied = True
        else:
            prior = (
                model.objects.select_for_update(no_key=True)
                .filter(pk=pk)
                .values_list(state_field, flat=True)
                .first()
            )
            if prior is None:
                raise model.DoesNotExist(f"{model.__name__} {pk} does not exist")
            applied = table.allows(prior, to)
            if applied:
                _update(model, {"pk": pk}, {state_field: to, **(extra or {})})
        insert_rows(
            history,
            history_columns(owner_field),
            [(pk, table.ledger, prior, to, at, actor, reason_code, not applied)],
        )
    return Outcome(ledger=table.ledger, applied=applied, prior=prior, next=to, reason_code=reason_code, at=at)


def transition_many(
    *,
    table: TransitionTable,
    model: type[models.Model],
    history: type[TransitionRecord],
    owner_field: str,
    pks: Sequence[int],
    to: str,
    actor: str,
    reason_code: str,
    state_field: str,
    at: datetime,
    extra: dict | None = None,
) -> int:
    """`transition` for many rows at once: each moves to `to` from the prior it holds.

    The rows are locked in primary-key order; a row already in `to` is not a
    move; a row whose prior the table does not declare stays as it is and its
    refusal is recorded. One history row per row either way. Returns how many moved.
    """
    if not pks:
        return 0
    with transaction.atomic():
        rows = list(
            model.objects.select_for_update(no_key=True)
            .filter(pk__in=list(pks))
            .exclude(**{state_field: to})
            .order_by("pk")
            .values_list("pk", state_field)
        )
        moving = [pk for pk, prior in rows if table.allows(prior, to)]
        if moving:
            model.objects.filter(pk__in=moving).update(**{state_field: to, **(extra or {})})
        insert_rows(
            history,
            history_columns(owner_field),
            [
                (pk, table.ledger, prior, to, at, actor, reason_code, not table.allows(prior, to))
                for pk, prior in rows
            ],
        )
    return len(moving)
