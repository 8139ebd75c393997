"""The ingress contract: state tables of the event and quarantine ledgers, and the trigger rule."""

import re

from conduit.statemachine import TransitionTable
from ingress.models import EventState, QuarantineState, ReconcileStatus

EVENT_TABLE = TransitionTable.declare(
    "event",
    [
        (None, EventState.RECEIVED),
        (EventState.RECEIVED, EventState.RECORD_READY),
        (EventState.RECEIVED, EventState.CLOSED_NO_REPLY),
        # A person may close a ready record without any outward action.
        (EventState.RECORD_READY, EventState.CLOSED_NO_REPLY),
        # A person's catch-up plans replies for a record no campaign answered when it arrived.
        (EventState.CLOSED_NO_REPLY, EventState.RECORD_READY),
    ],
)

# An event's reconcile status: what the last complete look at the source showed.
# Its history shares the event's transition table under the ledger "event_reconcile".
RECONCILE_TABLE = TransitionTable.declare(
    "event_reconcile",
    [
        (ReconcileStatus.UNRECONCILED, ReconcileStatus.MATCHED),
        (ReconcileStatus.UNRECONCILED, ReconcileStatus.SOURCE_UNVERIFIED),
        (ReconcileStatus.MATCHED, ReconcileStatus.SOURCE_UNVERIFIED),
        (ReconcileStatus.SOURCE_UNVERIFIED, ReconcileStatus.MATCHED),
    ],
)

QUARANTINE_TABLE = TransitionTable.declare(
    "quarantine",
    [
        (None, QuarantineState.QUARANTINED),
        (QuarantineState.QUARANTINED, QuarantineState.DISMISSED),
        (QuarantineState.QUARANTINED, QuarantineState.CORRECTED),
    ],
)

# Reason codes the webhook endpoint can return or record. Stable: operators
# and providers' dashboards match on them.
PROOF_CODES = (
    "missing_proof_headers",
    "malformed_proof_headers",
    "stale_timestamp",
    "future_timestamp",
    "invalid_signature",
)
QUARANTINE_CODES = PROOF_CODES + (
    "unparsable_body",
    "invalid_body",
    "missing_identity",
    "invalid_identity",
    "account_mismatch",
    "event_type_not_allowed",
    "invalid_occurred_at",
    "identity_conflict",
    "delivery_conflict",
    "unstorable_value",
    "unknown_account",
)


def trigger_matches(text: str, keywords: list[str]) -> bool:
    """True when any keyword occurs in the text as a whole word, ignoring case.

    No keywords means no match: a source without a trigger rule plans no reply.
    """
    folded = text.casefold()
    for keyword in keywords:
        needle = keyword.strip().casefold()
        if needle and re.search(r"(?<!\w)" + re.escape(needle) + r"(?!\w)", folded):
            return True
    return False
