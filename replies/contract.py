"""The reply-action contract: reply_key derivation and the declared transition table."""

from conduit.canonical import sha256_hex
from conduit.statemachine import TransitionTable
from replies.models import DeliveryState as S


def reply_key(event_key: str, purpose: str) -> str:
    """reply_key = SHA-256("reply|" + event_key + "|" + purpose), derived once at planning."""
    return sha256_hex("reply|" + event_key + "|" + purpose)


REPLY_TABLE = TransitionTable.declare(
    "reply",
    [
        (None, S.REVIEW_PENDING),
        (S.REVIEW_PENDING, S.APPROVED),
        (S.REVIEW_PENDING, S.CLOSED_NO_REPLY),
        (S.APPROVED, S.SENDING),
        (S.APPROVED, S.CLOSED_NO_REPLY),
        (S.SENDING, S.SENT),
        (S.SENDING, S.FAILED_BEFORE_SEND),
        (S.SENDING, S.SEND_STATUS_UNKNOWN),
        (S.SENDING, S.SUPPRESSED_TEST),
        (S.FAILED_BEFORE_SEND, S.SENDING),
        (S.FAILED_BEFORE_SEND, S.CLOSED_NO_REPLY),
        (S.SEND_STATUS_UNKNOWN, S.SENT),
        (S.SEND_STATUS_UNKNOWN, S.APPROVED),
        (S.SEND_STATUS_UNKNOWN, S.CLOSED_NO_REPLY),
        (S.SENT, S.SEND_STATUS_UNKNOWN),
    ],
)


# How long the sender waits before the next automatic attempt after a failure
# before send: 5 s doubling, capped, for at most MAX_AUTOMATIC_ATTEMPTS attempts.
BACKOFF_BASE_SECONDS = 5
BACKOFF_CAP_SECONDS = 300
MAX_AUTOMATIC_ATTEMPTS = 5


def backoff_seconds(attempt_count: int) -> int:
    return min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2 ** max(0, attempt_count - 1))
