"""The http-semantics evidence model reads Meta's error table: one meaning per code everywhere."""

from __future__ import annotations

import pytest

from conduit.providers.meta import errors
from reconcile.decisions.evidence import QUESTION, HttpSemanticsModel

MODEL = HttpSemanticsModel()


def answer(evidence: str, status: int | None = 400, transport: str = "response_received") -> str:
    return MODEL.answer(
        QUESTION, {"evidence": evidence, "http_status": status, "transport": transport}
    ).answer


def test_a_4xx_meta_saw_after_applying_is_not_established():
    """docs/platforms/meta.md#error-meanings: "A 4xx does not always mean 'not applied': an integration saw 20/1772107 after the
    Instagram comment had been created." The generic 4xx rule would say not_applied."""
    assert answer("graph_refused_after_apply") == "not_established"
    assert answer("graph_unknown_code") == "not_established"
    # The control: the same reply without the table's token is read as a plain rejection.
    assert answer("the provider answered 400") == "not_applied"


@pytest.mark.parametrize(
    "reason, expected",
    [
        ("throttled", "not_applied"),
        ("token_invalid", "not_applied"),
        ("window_expired", "not_applied"),
        ("already_replied", "applied"),
        ("graph_server_error", "not_established"),
        ("timeout_after_request", "not_established"),
        ("connection_lost_after_request", "not_established"),
        ("connect_failed", "not_applied"),
    ],
)
def test_every_token_means_what_the_transport_acted_on(reason, expected):
    assert answer(reason) == expected
    assert errors.outcome_of_reason(reason) is not None


def test_every_reason_of_the_table_has_an_answer():
    for row in errors.ROWS:
        assert errors.outcome_of_reason(row.meaning.reason) == row.meaning.outcome
