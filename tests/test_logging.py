"""The data-boundary log filter: credentials and message bodies never reach the log output."""

import logging

import pytest

from conduit.logging import BoundaryFilter


def render(message, *args, exc=None) -> str:
    record = logging.LogRecord("conduit.test", logging.INFO, __file__, 1, message, args, None)
    if exc is not None:
        record.exc_info = (type(exc), exc, None)
    BoundaryFilter().filter(record)
    return record.getMessage()


@pytest.mark.parametrize(
    "message,args",
    [
        ("secret %s", ("whsec_c29tZS1zZWNyZXQtdmFsdWUtMDAwMA==",)),
        ("header Authorization: Token %s", ("0123456789abcdef0123456789abcdef01234567",)),
        ("password=%s", ("hunter2-synthetic",)),
        ("body %s", ('{"account": "acct_test_01", "events": [{"text": "buyer words"}]}',)),
        ("text=%s", ("buyer words",)),
    ],
)
def test_credentials_and_bodies_are_withheld(message, args):
    assert render(message, *args).startswith("[record withheld by the data boundary")


def test_values_of_secret_environment_variables_are_withheld(monkeypatch):
    monkeypatch.setenv("CONDUIT_SOME_SOURCE_SECRET", "plain-value-without-a-prefix")
    assert "plain-value" not in render("config %s", "plain-value-without-a-prefix")
    assert "plain-value" not in render("failed", exc=ValueError("plain-value-without-a-prefix"))


def test_structured_lines_pass_unchanged():
    line = "send action=3 reply_key=" + "a" * 64 + " state=SENT code=receipt duration_ms=12"
    assert render(line) == line


def test_the_console_handler_carries_the_filter():
    handlers = logging.getLogger().handlers + logging.getLogger("django-q").handlers
    assert handlers and all(
        any(isinstance(f, BoundaryFilter) for f in h.filters)
        for h in handlers
        if type(h) is logging.StreamHandler
    )
