"""Reply planning at ingest: one REVIEW_PENDING action per declared purpose the event's family answers."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Sequence

from django.db import connection

from conduit.providers.base import Observation
from conduit.providers.registry import get_adapter, transports_for
from conduit.sql import columns_sql, insert_rows, json_casts
from conduit.statemachine import TransitionTable, creation_rows, history_columns, record_created
from ingress.models import Source
from replies.contract import REPLY_TABLE, reply_key
from replies.matching import CampaignMatch, SourceRules, source_rules
from replies.models import ApprovalState, ReplyAction, ReplyRoute, ReplyTransition
from replies.models import DeliveryState as S
from replies.services.window import _private_deadline, reply_deadline_reads_queue


def reply_actions_plan(
    *,
    observations: Sequence[Observation],
    adapter: str,
    purposes: list[str],
    actor: str,
    at: datetime,
    match_of: Callable[[Observation], CampaignMatch],
    purposes_of: Callable[[Observation], Sequence[str]] | None = None,
) -> list[int]:
    """Create one REVIEW_PENDING action per declared purpose for each newly inserted event.

    Called only inside the ingest transaction that inserted the events, so each
    event's own unique key already guarantees this runs once per event_key; the
    unique reply_key constraint guards it a second time. One INSERT for the
    actions and one for their history, whatever the number of events. Returns
    the new ids, event by event in purpose order.
    """
    rows, fill_later = reply_action_rows(
        observations=observations,
        adapter=adapter,
        purposes=purposes,
        at=at,
        match_of=match_of,
        purposes_of=purposes_of,
    )
    ids = insert_rows(ReplyAction, PLANNED.columns, rows)
    record_created(
        table=REPLY_TABLE,
        history=ReplyTransition,
        owner_field="action",
        owner_ids=ids,
        path=PLANNED.path,
        actor=actor,
        reason_codes=PLANNED.reasons,
        at=at,
    )
    reply_deadline_reads_queue(action_ids=[ids[position] for position in fill_later])
    return ids


@dataclass(frozen=True)
class ActionPlan:
    """How planned actions are written, for ingest to write them in its own statement
    (ingress.writes): their model and history, reply_action_rows' columns, and the creation
    path with its reason codes as the reply table declares it."""

    model: type
    history: type
    columns: tuple[str, ...]
    table: TransitionTable
    path: tuple[str, ...]
    reasons: tuple[str, ...]

    def history_row(self, *, actor: str, at: datetime) -> tuple:
        """The one history row each planned action gets, its owner left blank (None)."""
        (row,) = creation_rows(
            table=self.table, records=[(None, self.path, self.reasons)], actor=actor, at=at
        )
        return row


PLANNED = ActionPlan(
    model=ReplyAction,
    history=ReplyTransition,
    columns=(
        "reply_key",
        "event",
        "purpose",
        "campaign",
        "campaign_version",
        "delivery_state",
        "approval_state",
        "canary",
        "created_at",
        "reply_deadline",
    ),
    table=REPLY_TABLE,
    path=(S.REVIEW_PENDING,),
    reasons=("planned_on_first_receipt",),
)


def purposes_answering(*, source: Source) -> Callable[[str], tuple[str, ...]]:
    """Event type -> the source's purposes planned for an event of that type.

    None for a family that answers nothing (an edit, a hide, a removal: one comment is one raised
    hand, however often it changes); otherwise the declared purposes whose route's transport can
    answer the family (a DM only through a route that answers a message, never a comment reply
    or a private reply, which answer comments). A purpose with no route yet is planned only for a
    family every transport a route of this source may name answers (its route, declared later,
    decides where it goes). Routes are read only where some such transport could not answer.
    """
    adapter = get_adapter(source.adapter)
    transports = transports_for(source.adapter)
    declared = tuple(source.purposes)
    routes: dict[str, str] = {}

    @functools.cache
    def for_type(event_type: str) -> tuple[str, ...]:
        answers = adapter.family(event_type).answers
        if not answers:
            return ()
        if all(answers in cls.answers for cls in transports.values()):
            return declared
        if not routes:
            routes.update(
                ReplyRoute.objects.filter(source_id=source.pk).values_list("purpose", "transport_name")
            )
            routes.setdefault("", "")  # read once, even when the source has no route
        # A purpose with no route yet is planned only where every such transport could answer (above).
        return tuple(
            p for p in declared if routes.get(p) in transports and answers in transports[routes[p]].answers
        )

    return for_type


def reply_action_rows(
    *,
    observations: Sequence[Observation],
    adapter: str,
    purposes: list[str],
    at: datetime,
    match_of: Callable[[Observation], CampaignMatch],
    purposes_of: Callable[[Observation], Sequence[str]] | None = None,
) -> tuple[list[tuple], list[int]]:
    """The planned actions' rows (PLANNED.columns order), event by event in purpose order, and the
    positions of those whose deadline needs the comment's real time (read after commit).
    `match_of` is the campaign each event matched (its copy answers it); `purposes_of` narrows the
    purposes per event (ingest passes what the campaign and purposes_answering allow)."""
    rows = []
    fill_later = []
    for observation in observations:
        match = match_of(observation)
        for purpose in purposes if purposes_of is None else purposes_of(observation):
            deadline, later = _private_deadline(observation, adapter, purpose)
            if later:
                fill_later.append(len(rows))
            rows.append(
                (
                    reply_key(observation.event_key, purpose),
                    observation.event_key,
                    purpose,
                    match.campaign_id,
                    match.campaign_version,
                    S.REVIEW_PENDING,
                    ApprovalState.REVIEW_PENDING,
                    observation.canary,
                    at,
                    deadline,
                )
            )
    return rows, fill_later


@dataclass(frozen=True)
class IngestPlanner:
    """Replies' side of ingest, registered in RepliesConfig.ready (ingress.hooks.ReplyPlanner): the
    purposes each new event plans, the planned rows, and their writes, statement by statement or
    as the reply ledger's part of ingest's one statement (ingress.writes composes it)."""

    plan: ActionPlan

    def purposes_for(self, source: Source) -> Callable[[str], tuple[str, ...]]:
        return purposes_answering(source=source)

    def write(self, **planned) -> list[int]:
        return reply_actions_plan(**planned)

    def rows(self, **planned) -> tuple[list[tuple], list[int]]:
        return reply_action_rows(**planned)

    def history_row(self, *, actor: str, at: datetime) -> tuple:
        return self.plan.history_row(actor=actor, at=at)

    def after_write(self, *, action_ids: Sequence[int]) -> None:
        reply_deadline_reads_queue(action_ids=action_ids)

    def statement_part(self, *, events: str, key: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
        """The CTEs `a` (the planned actions, returning id and reply_key) and `ah` (their history),
        each action joined to its event in the CTE `events` and written only for an event that
        statement inserted; with the fields of their JSON parameters' rows."""
        qn = connection.ops.quote_name
        plan = self.plan
        a_columns, a_fields = columns_sql(plan.model, plan.columns)
        ah_columns, ah_fields = columns_sql(plan.history, history_columns("action"))
        # A planned action's event key is its second value; its history row's first value is
        # its owner, resolved here to the new id.
        action_event = plan.columns.index("event")
        return (
            f"""a AS (
  INSERT INTO {qn(plan.model._meta.db_table)} ({a_columns})
  SELECT {", ".join(json_casts(a_fields, "r"))}
  FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS r(e, n) JOIN {events} ON {events}.{key} = r.e->>{action_event}
  WHERE {events}.seen_count = 1 ORDER BY r.n
  RETURNING id, reply_key
), ah AS (
  INSERT INTO {qn(plan.history._meta.db_table)} ({ah_columns})
  SELECT a.id, {", ".join(json_casts(ah_fields[1:], "r", 1))}
  FROM a CROSS JOIN (SELECT %s::jsonb AS e) r ORDER BY a.id
)""",
            a_fields,
            ah_fields,
        )


INGEST_PLANNER = IngestPlanner(plan=PLANNED)


class CampaignRules:
    """Replies' trigger rules, registered in RepliesConfig.ready (ingress.hooks.TriggerRules)."""

    def rules(self, source: Source) -> SourceRules:
        return source_rules(source)

    def keywords_of(self, source: Source) -> list[str]:
        from replies.services.campaigns import keywords_of

        return keywords_of(source)

    def keywords_set(
        self, *, source: Source, keywords: list[str], actor: str, registering: bool = False
    ) -> None:
        from replies.services.campaigns import keywords_set

        keywords_set(source=source, keywords=keywords, actor=actor, registering=registering)


TRIGGER_RULES = CampaignRules()
