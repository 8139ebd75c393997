"""The reply-action contract: reply_key derivation and the declared transition table."""

from conduit.backoff import backoff_delay
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
        # A person's "retry now" from the stranded-sends queue, same reply key.
        (S.FAILED_BEFORE_SEND, S.APPROVED),
        (S.FAILED_BEFORE_SEND, S.CLOSED_NO_REPLY),
        (S.SEND_STATUS_UNKNOWN, S.SENT),
        (S.SEND_STATUS_UNKNOWN, S.APPROVED),
        (S.SEND_STATUS_UNKNOWN, S.CLOSED_NO_REPLY),
        (S.SENT, S.SEND_STATUS_UNKNOWN),
    ],
)


# How long the sender waits before the next automatic attempt after a failure
# before send: 5 s doubling up to the cap. After MAX_AUTOMATIC_ATTEMPTS the
# action is "exhausted": it shows in the stranded-sends queue and doctor, and
# the sender keeps retrying it at the capped interval under the same reply key
# (docs/replies.md#outcomes: FAILED_BEFORE_SEND -> "Retry under the same keys"), unless its
# failure is in INCURABLE_FAILURES.
BACKOFF_BASE_SECONDS = 5
BACKOFF_CAP_SECONDS = 300
MAX_AUTOMATIC_ATTEMPTS = 5


def backoff_seconds(attempt_count: int) -> int:
    """The wait after `attempt_count` failed attempts: conduit.backoff's schedule, then the cap."""
    if attempt_count >= MAX_AUTOMATIC_ATTEMPTS:
        return BACKOFF_CAP_SECONDS
    return int(backoff_delay(failures=attempt_count, cap=BACKOFF_CAP_SECONDS, base=BACKOFF_BASE_SECONDS))


# Failure-before-send codes that retrying the same request cannot cure: the
# sender schedules no further automatic attempt for them (the action is
# "stopped" and waits in the stranded-sends queue for a person's "retry now" or
# "close without reply"). Every other code is retried. code -> why.
INCURABLE_FAILURES: dict[str, str] = {
    "live_send_disabled": (
        "the environment or the source forbids live sending; it stays forbidden until an owner "
        "changes it, so retry after that"
    ),
    "transport_misconfigured": (
        "the reply route is missing, names an unknown transport or an address the transport "
        "refuses; only a change to the route cures it"
    ),
    "approved_copy_missing": (
        "the copy version the reply was approved with no longer exists; nothing can be sent without it"
    ),
    "provider_refused_400": (
        "the provider refused the request as malformed before applying it; the same request "
        "under the same key is refused the same way"
    ),
    "provider_refused_404": (
        "the provider has no such endpoint (the route's target URL is wrong); the same "
        "request is refused the same way"
    ),
}


def failure_is_incurable(code: str) -> bool:
    return code in INCURABLE_FAILURES
