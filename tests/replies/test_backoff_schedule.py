"""One backoff schedule (conduit.backoff) behind the sender's retries and reconciliation's."""

from conduit.backoff import backoff_delay
from replies.contract import (
    BACKOFF_CAP_SECONDS,
    MAX_AUTOMATIC_ATTEMPTS,
    backoff_seconds,
)


def test_the_shared_schedule_doubles_from_the_base_up_to_the_cap():
    assert [backoff_delay(failures=n, cap=300) for n in range(0, 9)] == [5, 5, 10, 20, 40, 80, 160, 300, 300]
    assert backoff_delay(failures=10**9, cap=60) == 60  # bounded exponent: no huge arithmetic
    assert backoff_delay(failures=3, cap=1000, base=1) == 4


def test_the_sender_uses_the_shared_schedule_before_it_is_exhausted():
    """docs/replies.md#outcomes: "backoff 5 s doubling to a 300 s cap"; past MAX_AUTOMATIC_ATTEMPTS, the cap."""
    for attempts in range(0, MAX_AUTOMATIC_ATTEMPTS):
        assert backoff_seconds(attempts) == backoff_delay(failures=attempts, cap=BACKOFF_CAP_SECONDS)
    assert backoff_seconds(MAX_AUTOMATIC_ATTEMPTS) == BACKOFF_CAP_SECONDS
