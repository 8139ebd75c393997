"""The sender's backoff schedule and the ingress trigger rule."""

import pytest

from ingress.contract import trigger_matches
from replies.contract import (
    BACKOFF_CAP_SECONDS,
    MAX_AUTOMATIC_ATTEMPTS,
    backoff_seconds,
    failure_is_incurable,
)


def test_backoff_is_five_seconds_doubling_up_to_the_cap():
    """docs/replies.md#outcomes: "backoff 5 s doubling to a 300 s cap"."""
    assert [backoff_seconds(n) for n in range(0, 5)] == [5, 5, 10, 20, 40]
    assert backoff_seconds(7) == BACKOFF_CAP_SECONDS == 300
    assert backoff_seconds(100) == 300


def test_an_exhausted_action_waits_the_capped_interval():
    assert backoff_seconds(MAX_AUTOMATIC_ATTEMPTS) == BACKOFF_CAP_SECONDS
    assert backoff_seconds(MAX_AUTOMATIC_ATTEMPTS - 1) < BACKOFF_CAP_SECONDS


def test_only_listed_failures_are_incurable():
    assert failure_is_incurable("live_send_disabled")
    assert not failure_is_incurable("connection_refused")


@pytest.mark.parametrize(
    "text, keywords, expected",
    [
        ("send me the checklist please", ["CHECKLIST"], True),
        ("Checklist!", ["checklist"], True),
        ("checklists", ["checklist"], False),
        ("prechecklist", ["checklist"], False),
        ("a checklist", ["  checklist  "], True),
        ("anything", [], False),
        ("anything", ["", "   "], False),
        ("price: 5$ now", ["5$"], True),
        ("price: 55 now", ["5$"], False),
        ("no match here", ["other", "here"], True),
        ("no match here", ["here", "other"], True),
        ("STRASSE", ["straße"], True),
    ],
)
def test_trigger_is_any_keyword_as_a_whole_word_ignoring_case(text, keywords, expected):
    assert trigger_matches(text, keywords) is expected
