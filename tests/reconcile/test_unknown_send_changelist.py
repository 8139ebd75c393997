"""The unknown-send changelist only reads: a constant number of queries
whatever the page size, and no network connection for any row's verdict."""

from __future__ import annotations

import http.client
import socket
from pathlib import Path

import pytest
from django.utils import timezone

from reconcile import admin as reconcile_admin
from reconcile.admin import UnknownSendDecisionAdmin
from reconcile.admin.words import VERDICT_WORDS
from replies.models import ReplyAction, ReplyRoute, SendAttempt
from tests.reconcile.conftest import body, item

pytestmark = pytest.mark.django_db

QUEUE = "/admin/replies/unknownsendqueue/"
# Session, user, the source filter's choices, two counts, the page, one prefetch each for
# attempts and routes, the purpose filter's choices: 9 at 2 rows as at 40 (measured).
MAX_QUERIES = 9


@pytest.fixture
def unknown_sends(wire, deliver, provider):
    """`rows` actions in SEND_STATUS_UNKNOWN, each with two attempts, routed to a live provider."""
    state = provider()
    wire(state)

    def make(rows: int) -> list[ReplyAction]:
        assert deliver(body(*[item(n) for n in range(1, rows // 2 + 1)])).status_code == 200
        actions = list(ReplyAction.objects.order_by("id"))
        assert len(actions) == rows
        ReplyAction.objects.update(
            delivery_state="SEND_STATUS_UNKNOWN", attempt_count=2, last_error_code="timeout_after_request"
        )
        now = timezone.now()
        SendAttempt.objects.bulk_create(
            [
                SendAttempt(
                    action=action,
                    attempt_number=n,
                    at=now,
                    transport=transport,
                    http_status=status,
                    evidence=evidence,
                    transport_name="sandbox",
                )
                for action in actions
                for n, transport, status, evidence in (
                    (1, "response_received", 503, "provider_error_503"),
                    (2, "sent", None, "timeout_after_request"),
                )
            ]
        )
        return actions

    return make


@pytest.fixture
def connections(monkeypatch) -> list[str]:
    """Every outbound connection attempted, recorded and refused (the code under test may swallow
    the refusal, so the record is what is asserted)."""
    tried: list[str] = []

    def refuse_socket(address, *args, **kwargs):
        tried.append(f"socket {address}")
        raise OSError("network is off in this test")

    def refuse_http(self):
        tried.append(f"http {self.host}:{self.port}")
        raise OSError("network is off in this test")

    monkeypatch.setattr(socket, "create_connection", refuse_socket)
    monkeypatch.setattr(http.client.HTTPConnection, "connect", refuse_http)
    return tried


def _old_verdict(self, obj):
    """A per-row verdict, kept as a control: a transport built per row, attempts queried per row."""
    from reconcile.selectors import reply_decision_request

    decision = self._decision(reply_decision_request(obj))
    return f"{decision['verdict']}: {decision['next']['action']}" if decision else "-"


@pytest.mark.parametrize("rows", [2, 40])
def test_the_changelist_runs_a_constant_number_of_queries(
    admin_client, unknown_sends, rows, django_assert_max_num_queries
):
    unknown_sends(rows)
    with django_assert_max_num_queries(MAX_QUERIES):
        page = admin_client.get(QUEUE).content.decode()
    assert page.count(VERDICT_WORDS["reconcile"]) == rows  # "reconcile: query_destination", in words


def test_control_a_verdict_built_per_row_grows_with_the_page(
    admin_client, unknown_sends, monkeypatch, django_assert_max_num_queries
):
    """Positive control: with the verdict built per row (the old column), 40 rows pass the bound."""
    unknown_sends(40)
    monkeypatch.setattr(UnknownSendDecisionAdmin, "verdict", _old_verdict)
    with pytest.raises(pytest.fail.Exception, match="Expected to perform"):
        with django_assert_max_num_queries(MAX_QUERIES):
            admin_client.get(QUEUE)


def test_the_changelist_opens_no_network_connection(admin_client, unknown_sends, connections):
    unknown_sends(4)
    assert ReplyRoute.objects.exclude(target_url="").exists()  # a provider the old column would have asked
    response = admin_client.get(QUEUE)
    assert response.status_code == 200 and response.content.decode().count(VERDICT_WORDS["reconcile"]) == 4
    assert connections == []


def test_control_a_verdict_that_builds_the_transport_is_caught(
    admin_client, unknown_sends, connections, monkeypatch
):
    """Positive control: the old column builds the sandbox transport per row, which asks the
    provider for its capabilities: the recorder sees each attempt."""
    unknown_sends(4)
    monkeypatch.setattr(UnknownSendDecisionAdmin, "verdict", _old_verdict)
    assert admin_client.get(QUEUE).status_code == 200
    assert len(connections) >= 4


def test_the_queue_is_registered_once_with_the_decision_column():
    """Each admin registered once, in its own app: replies defines the queue's admin, reconcile
    registers it (with the verdict) and unregisters nothing."""
    from django.contrib import admin

    from replies.models import UnknownSendQueue

    assert type(admin.site._registry[UnknownSendQueue]) is UnknownSendDecisionAdmin
    assert not any(
        "unregister(" in module.read_text() for module in Path(reconcile_admin.__file__).parent.glob("*.py")
    )
