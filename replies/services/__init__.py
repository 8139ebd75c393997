"""Replies writes: campaigns, planning at ingest, approval, closing, copy versions, routes, and a person's
resolution of stranded and unknown sends. Every state change goes through REPLY_TABLE.

One module per concept; the names callers use are re-exported here."""

from __future__ import annotations

# Every state change of the reply ledger goes through its one transition function.
from replies.ledger import reply_action_transition
from replies.services.approval import reply_approve
from replies.services.budgets import send_budget_set
from replies.services.campaigns import (
    CampaignRefused,
    campaign_copy_set,
    campaign_create,
    campaign_state_set,
    campaign_update,
)
from replies.services.copies import reply_copy_create
from replies.services.planning import (
    PLANNED,
    ActionPlan,
    purposes_answering,
    reply_action_rows,
    reply_actions_plan,
)
from replies.services.resolution import (
    Lookup,
    reply_close,
    stranded_retry_now,
    unknown_authorize_retry,
    unknown_confirm_sent,
)
from replies.services.results import Result
from replies.services.routes import (
    ROUTE_FIELDS,
    LiveSendRefused,
    RouteConflict,
    reply_route_declare,
    reply_route_update,
)
from replies.services.window import (
    PRIVATE_PURPOSE,
    WINDOW_CLOSABLE,
    WINDOW_CLOSER,
    reply_deadline_fill,
    reply_deadline_reads_queue,
    reply_deadlines_fill,
    reply_windows_expire,
)

__all__ = [
    "PLANNED",
    "PRIVATE_PURPOSE",
    "ROUTE_FIELDS",
    "WINDOW_CLOSABLE",
    "WINDOW_CLOSER",
    "ActionPlan",
    "CampaignRefused",
    "LiveSendRefused",
    "Lookup",
    "Result",
    "RouteConflict",
    "campaign_copy_set",
    "campaign_create",
    "campaign_state_set",
    "campaign_update",
    "purposes_answering",
    "reply_action_rows",
    "reply_action_transition",
    "reply_actions_plan",
    "reply_approve",
    "reply_close",
    "reply_copy_create",
    "reply_deadline_fill",
    "reply_deadline_reads_queue",
    "reply_deadlines_fill",
    "reply_route_declare",
    "reply_route_update",
    "reply_windows_expire",
    "send_budget_set",
    "stranded_retry_now",
    "unknown_authorize_retry",
    "unknown_confirm_sent",
]
