"""Hooks the apps built on ingress register in their AppConfig.ready: ingest asks them, never imports them."""

from __future__ import annotations

from datetime import datetime
from typing import Callable, Protocol, Sequence

from conduit.providers.base import Observation


class ReplyPlanner(Protocol):
    """What ingest asks of the app that plans replies for new events (replies registers one).

    Ingest calls it inside the transaction that inserts the events, so what it plans commits or
    rolls back with them. Statement by statement, `write` inserts the planned rows; on PostgreSQL
    ingest's one statement (ingress.writes) carries them instead: `rows` and `history_row` are its
    parameters, `statement_part` the part of its text that writes them, and `after_write` runs on
    the ids it returned.
    """

    def purposes_for(self, source) -> Callable[[str], Sequence[str]]:
        """Event type -> the source's purposes planned for an event of that type."""

    def write(
        self,
        *,
        observations: Sequence[Observation],
        adapter: str,
        purposes: list[str],
        actor: str,
        at: datetime,
        match_of: Callable[[Observation], "Match"],
        purposes_of: Callable[[Observation], Sequence[str]],
    ) -> list[int]:
        """Plan and write the replies of these newly inserted events; their ids."""

    def rows(
        self,
        *,
        observations: Sequence[Observation],
        adapter: str,
        purposes: list[str],
        at: datetime,
        match_of: Callable[[Observation], "Match"],
        purposes_of: Callable[[Observation], Sequence[str]],
    ) -> tuple[list[tuple], list[int]]:
        """The planned rows for the one statement, and the positions of those `after_write` follows up."""

    def history_row(self, *, actor: str, at: datetime) -> tuple:
        """The one history row each planned row gets, its owner left blank."""

    def statement_part(self, *, events: str, key: str) -> tuple[str, Sequence[str], Sequence[str]]:
        """The statement's CTEs that write the planned rows (`a`, returning id and reply_key) and their
        history, joined to the inserted events' CTE `events` on its quoted key column `key`; with the
        fields of their two JSON parameters."""

    def after_write(self, *, action_ids: Sequence[int]) -> None:
        """Follow up the rows the one statement wrote (at `rows`' positions)."""


_PLANNERS: list[ReplyPlanner] = []


def reply_planner_register(planner: ReplyPlanner) -> None:
    """Register the planner ingest asks (replies does, in its AppConfig.ready); a second call replaces it."""
    _PLANNERS[:] = [planner]


def reply_planner() -> ReplyPlanner:
    """The registered planner; LookupError when no app registered one (ingest cannot plan then)."""
    if not _PLANNERS:
        raise LookupError("no reply planner registered: the replies app registers one in its AppConfig.ready")
    return _PLANNERS[0]


class Match(Protocol):
    """The campaign that matched an event: its id and version, and the purposes it answers with."""

    campaign_id: int
    campaign_version: int
    purposes: tuple[str, ...]


class Rules(Protocol):
    """A source's trigger rules at one version of them."""

    version: int  # what the events matched by them record as their trigger_rule_version

    def match(self, observation: Observation) -> Match | None:
        """The campaign the observation matches (the most specific), or None."""


class TriggerRules(Protocol):
    """What ingest and source registration ask of the app that holds the trigger rules (replies'
    campaigns): which campaign an event matches, and the source's every-post keyword list."""

    def rules(self, source) -> Rules:
        """The source's rules: those of the version `source` was read at, or newer ones read now
        (their version says which)."""

    def keywords_of(self, source) -> list[str]:
        """The keywords of the source's every-post campaign made from its keyword list ([] if none)."""

    def keywords_set(self, *, source, keywords: list[str], actor: str, registering: bool = False) -> None:
        """Make `keywords` the source's every-post keyword list (its account-default campaign),
        inside the caller's transaction; ValidationError naming `trigger_keywords` if refused.
        `registering`: made with the source, its first rules (no new rule version)."""


_RULES: list[TriggerRules] = []


def trigger_rules_register(rules: TriggerRules) -> None:
    """Register the trigger rules ingest asks (replies does, in its AppConfig.ready)."""
    _RULES[:] = [rules]


def trigger_rules() -> TriggerRules:
    """The registered trigger rules; LookupError when no app registered them."""
    if not _RULES:
        raise LookupError(
            "no trigger rules registered: the replies app registers them in its AppConfig.ready"
        )
    return _RULES[0]
