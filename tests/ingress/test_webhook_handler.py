"""The WSGI application serves /webhooks/ through the lean webhook handler and every
other path through Django's full middleware; the webhook keeps its metrics and host checks."""

from __future__ import annotations

import io
import wsgiref.util

import pytest
from django.core.signals import request_started
from django.db import close_old_connections

from conduit import handlers
from ingress.models import InboundEvent
from tests.conftest import fixture_body, sign

pytestmark = pytest.mark.usefixtures("sandbox_source")


def call(
    app, method: str, path: str, body: bytes = b"", headers: dict | None = None, host: str = "127.0.0.1"
) -> tuple[int, dict[str, str], bytes]:
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "HTTP_HOST": host,
        "wsgi.input": io.BytesIO(body),
        "CONTENT_LENGTH": str(len(body)),
        "CONTENT_TYPE": "application/json",
        **{"HTTP_" + name.upper().replace("-", "_"): value for name, value in (headers or {}).items()},
    }
    wsgiref.util.setup_testing_defaults(environ)
    answer: dict = {}

    def start_response(status, response_headers, exc_info=None):
        answer["status"], answer["headers"] = int(status.split()[0]), dict(response_headers)

    content = b"".join(app(environ, start_response))
    return answer["status"], answer["headers"], content


def webhook(app, host: str = "127.0.0.1"):
    body = fixture_body("comment__northstar")
    return call(app, "POST", "/webhooks/sandbox/", body, sign(body), host=host)


@pytest.fixture(autouse=True)
def keep_the_test_connection():
    # As Django's test client does: a WSGI handler closes old connections when a request starts,
    # which would close the connection holding this test's transaction.
    request_started.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)


@pytest.fixture
def application():
    from conduit.wsgi import application

    return application


def test_a_webhook_skips_the_back_office_layers_and_the_admin_keeps_them(application):
    status, headers, _ = webhook(application)
    assert status == 200
    assert InboundEvent.objects.count() == 1
    # XFrameOptionsMiddleware (back office only) marks every answer it sees; sessions add Vary: Cookie.
    assert "X-Frame-Options" not in headers and "Cookie" not in headers.get("Vary", "")
    status, headers, _ = call(application, "GET", "/admin/login/")
    assert status == 200
    assert headers["X-Frame-Options"] == "DENY" and "Cookie" in headers["Vary"]


def test_the_webhook_handler_still_refuses_a_host_it_does_not_serve(application):
    status, _, _ = webhook(application, host="evil.example")
    assert status == 400
    assert InboundEvent.objects.count() == 0


def test_the_webhook_handler_still_counts_its_requests(application):
    from conduit.metrics import WEBHOOK_REQUESTS

    before = WEBHOOK_REQUESTS.labels(source="sandbox", status="200")._value.get()
    assert webhook(application)[0] == 200
    assert WEBHOOK_REQUESTS.labels(source="sandbox", status="200")._value.get() == before + 1


def test_positive_control_without_the_split_a_webhook_goes_through_the_full_chain(monkeypatch):
    """Break the split on purpose: the first test's check must then fail."""
    from django.core.wsgi import get_wsgi_application

    monkeypatch.setattr(handlers, "WEBHOOK_PREFIX", "/nothing-matches/")
    unsplit = handlers.webhooks_apart(get_wsgi_application())
    with pytest.raises(AssertionError, match="'X-Frame-Options' not in"):  # the clickjacking layer ran
        test_a_webhook_skips_the_back_office_layers_and_the_admin_keeps_them(unsplit)


def test_a_webhook_answers_json_whatever_its_sender_accepts(application):
    """A provider reads the status: an Accept header that excludes JSON must not earn a 406 (and a
    retry); the answer is the usual JSON."""
    body = fixture_body("comment__northstar")
    status, headers, content = call(
        application, "POST", "/webhooks/sandbox/", body, {**sign(body), "Accept": "text/html"}
    )
    assert (status, headers["Content-Type"]) == (200, "application/json")
    assert b'"result":"accepted"' in content


def test_positive_control_with_drf_s_negotiation_the_sender_s_accept_refuses(application, monkeypatch):
    from rest_framework.negotiation import DefaultContentNegotiation

    from ingress.views import WebhookView

    monkeypatch.setattr(WebhookView, "content_negotiation_class", DefaultContentNegotiation)
    with pytest.raises(AssertionError, match=r"\(406, 'application/json'\) == \(200"):
        test_a_webhook_answers_json_whatever_its_sender_accepts(application)
