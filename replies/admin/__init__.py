"""Replies in the admin: campaigns, the review and stranded-send queues, approved copy, reply routes, the ledgers.

The unknown-send queue's admin class lives here too, unregistered: reconcile
registers its subclass (with the replay verdict column), once, in its own app.
Each module registers its own model admins; importing them here is the registration."""

from replies.admin.campaigns import CampaignAdmin, CampaignForm
from replies.admin.copies import ReplyCopyAdmin, ReplyCopyForm
from replies.admin.ledgers import (
    ActionAdmin,
    CanarySinkAdmin,
    DecidedFilter,
    DeclaredPurposeFilter,
    EventReplyActionInline,
    ReplyActionAdmin,
    ReplyTransitionInline,
    SendAttemptAdmin,
    SendAttemptInline,
)
from replies.admin.queues import (
    QueueAdmin,
    ReviewQueueAdmin,
    StrandedSendQueueAdmin,
    UnknownSendQueueAdmin,
    confirmed_each,
)
from replies.admin.routes import ReplyRouteAdmin, ReplyRouteForm, SendBudgetAdmin

__all__ = [
    "ActionAdmin",
    "CampaignAdmin",
    "CampaignForm",
    "CanarySinkAdmin",
    "DecidedFilter",
    "DeclaredPurposeFilter",
    "EventReplyActionInline",
    "QueueAdmin",
    "ReplyActionAdmin",
    "ReplyCopyAdmin",
    "ReplyCopyForm",
    "ReplyRouteAdmin",
    "ReplyRouteForm",
    "ReplyTransitionInline",
    "ReviewQueueAdmin",
    "SendAttemptAdmin",
    "SendAttemptInline",
    "SendBudgetAdmin",
    "StrandedSendQueueAdmin",
    "UnknownSendQueueAdmin",
    "confirmed_each",
]
