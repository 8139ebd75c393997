"""Reconciliation's codes in words for people: each label (the models' choices) with one line of meaning.

The stored values and the JSON export keep the codes; the admin pages show these.
"""

from __future__ import annotations

from django.utils.html import format_html

from reconcile.models import Decision, FindingKind, Repair, RepairOutcome, RunState

FINDING_MEANINGS = {
    FindingKind.MISSING_LOCAL: "The source has this event and Conduit did not: replayed through ingest, "
    "its replies held for review.",
    FindingKind.SOURCE_UNVERIFIED: "Conduit holds this event but the scan did not read it on the source: "
    "kept, marked not seen.",
    FindingKind.IDENTITY_CONFLICT: "The source shows this event with other content than Conduit first "
    "accepted: the first stays, the other goes to quarantine.",
    FindingKind.RECEIPT_ATTACHED: "A reply whose sending was unclear is on the platform: its receipt is "
    "attached and it is marked sent.",
    FindingKind.RECEIPT_MISSING: "Marked sent, but the platform shows no such reply: now marked may or "
    "may not have been sent; nothing is resent.",
    FindingKind.RETRY_CANDIDATE: "No receipt was found: a retry under the same reply key may be safe; "
    "a person decides.",
    FindingKind.UNEXPECTED_RECEIPT: "The platform holds a reply Conduit closed or has not sent: a person "
    "acknowledges it.",
    FindingKind.UNKNOWN_RECEIPT: "The platform holds a reply under a key Conduit never planned: a person "
    "acknowledges it.",
    FindingKind.INVALID_SOURCE_ITEM: "An item on the source that Conduit could not read: nothing was "
    "changed.",
    FindingKind.NO_STATUS: "Marked sent, but the platform has reported nothing of the message since (no "
    "sent, delivered, read or failed): a person checks the conversation; nothing is resent.",
}

DECISION_MEANINGS = {
    Decision.RETRY_AUTHORIZED: "A person allowed the same reply to be sent again under the same key.",
    Decision.CLOSED: "A person closed it: nothing more is sent.",
    Decision.CONFIRMED_SENT: "A person saw the reply on the platform: marked sent, nothing resent.",
    Decision.DISMISSED: "The quarantined input was reviewed and dismissed.",
    Decision.CORRECTED: "The quarantined input was reviewed and corrected.",
}

RUN_MEANINGS = {
    RunState.SCANNING: "Pages are being read from the source; nothing is compared yet.",
    RunState.REPAIRING: "The report is written; the repairs it allows are being applied.",
    RunState.PUBLISHED: "The report is kept and its repairs are done.",
    RunState.DISCARDED: "Ended without a report: its read pages were dropped, nothing else changed.",
}

# Why a repair was refused or failed (Finding.repair_code; docs/concepts/reconciliation.md#repairs).
REPAIR_CODE_WORDS = {
    "state_moved": "the reply moved on meanwhile",
    "action_gone": "the reply no longer exists",
    "replay_refused": "ingest refused the replayed batch",
    "database_error": "a database error",
    "unexpected_error": "an unexpected error",
}

# Who started a scan (ReconcileRun.trigger).
TRIGGER_WORDS = {
    "schedule": "on the schedule",
    "command": "from the command line",
    "admin": "from the admin (Reconcile now)",
    "canary": "by the canary",
}

# The replay-decision engine's verdicts (reconcile.decisions.engine.VERDICTS).
VERDICT_WORDS = {
    "proceed": "Safe to go ahead",
    "existing": "Already done: change nothing",
    "reject": "Conflict: do not send",
    "applied": "The platform has it: record it, never resend",
    "retry": "Safe to retry under the same key",
    "reconcile": "Unclear: ask the platform before any retry",
}


def label(choices, value: str) -> str:
    """A stored code's label, or the code itself when it is not one of `choices` (nothing hidden)."""
    try:
        return choices(value).label
    except ValueError:
        return value or "-"


def kind_words(kind: str) -> str:
    """A finding kind as its label with its meaning below (for a table cell)."""
    return format_html(
        '{}<span class="conduit-meaning">{}</span>', label(FindingKind, kind), FINDING_MEANINGS.get(kind, "")
    )


def repair_words(repair: str, outcome: str, code: str = "") -> str:
    """A finding's repair and what became of it, in words: "Replayed through ingest: refused (...)"."""
    what = label(Repair, repair)
    if not outcome:
        return what
    result = label(RepairOutcome, outcome).lower()
    why = REPAIR_CODE_WORDS.get(code, code)
    return f"{what}: {result} ({why})" if why else f"{what}: {result}"


def delivery_words(state: str) -> str:
    """A reply action's delivery state as the replies app labels it."""
    from replies.models import DeliveryState

    return label(DeliveryState, state)
