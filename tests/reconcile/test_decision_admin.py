"""The unknown-send view shows each action's replay decision, built from its own ledger."""

import pytest

from reconcile.admin.words import VERDICT_WORDS
from reconcile.decisions.schema import violations
from reconcile.selectors import reply_decision_request, reply_digest
from replies.sender import reply_send
from replies.services import reply_approve
from tests.conftest import fail_next


@pytest.fixture
def unknown(provider, wire, planned):
    def make(mode: str, **capabilities):
        state = provider(**capabilities)
        wire(state)
        action, _ = planned()
        reply_approve(action_id=action.pk, actor="reviewer_test")
        fail_next(state, mode)
        assert reply_send(action_id=action.pk) == "SEND_STATUS_UNKNOWN"
        action.refresh_from_db()
        return action

    return make


def test_the_request_comes_from_the_action_its_attempts_and_the_transport(unknown):
    action = unknown("error_after_accept")
    request = reply_decision_request(action)
    assert violations(request) == []
    assert request["proposal"] == {
        "operation": "deliver",
        "key": action.reply_key,
        "digest": reply_digest(action),
    }
    assert request["destination"] == {"name": "sandbox", "mode": "event", "dedupe": "verified"}
    (attempt,) = request["attempts"]
    assert (attempt["transport"], attempt["http_status"], attempt["evidence"]) == (
        "response_received",
        503,
        "provider_error_503",
    )


def test_without_idempotency_the_page_says_reconcile_and_shows_the_questions(admin_client, unknown, settings):
    settings.CONDUIT_DECISION_ROLE = "Operator on duty"
    action = unknown("drop_after_accept", idempotency_key=False, receipt_lookup=True)
    assert reply_decision_request(action)["destination"]["dedupe"] == "none"
    page = admin_client.get(f"/admin/replies/unknownsendqueue/{action.pk}/change/").content.decode()
    assert "reconcile" in page and "query_destination" in page and "Operator on duty" in page
    assert "attempts/0 destination_outcome@1: model_unavailable" in page


def test_with_verified_deduplication_the_page_says_retry(admin_client, unknown):
    """The action's own page asks the provider for its capabilities (the sandbox verifies
    deduplication); the changelist reads the transport class's declaration, which for the
    sandbox is the conservative one: query the destination first."""
    action = unknown("timeout_after_accept")
    page = admin_client.get(f"/admin/replies/unknownsendqueue/{action.pk}/change/").content.decode()
    assert f"<strong>{VERDICT_WORDS['retry']}</strong>" in page  # retry, in words
    queue = admin_client.get("/admin/replies/unknownsendqueue/").content.decode()
    assert VERDICT_WORDS["reconcile"] in queue and VERDICT_WORDS["retry"] not in queue


def test_a_transport_class_declaring_deduplication_makes_the_column_say_retry(
    admin_client, unknown, monkeypatch
):
    """The column's `dedupe` is the transport class's `capabilities`: a class declaring
    idempotency keys reads `verified`, and the decision is a retry under the same key."""
    from conduit.providers import registry
    from conduit.providers.base import Capabilities, Transport
    from replies.models import ReplyRoute

    class DeclaresDedupe(Transport):
        name = "declares-dedupe"
        live = False
        capabilities = Capabilities(idempotency_key=True, receipt_lookup=True)

        def __init__(self, url, timeout):
            raise AssertionError("the changelist built a transport")

    action = unknown("timeout_after_accept")
    monkeypatch.setitem(registry.TRANSPORTS, DeclaresDedupe.name, DeclaresDedupe)
    ReplyRoute.objects.update(transport_name=DeclaresDedupe.name)
    queue = admin_client.get("/admin/replies/unknownsendqueue/").content.decode()
    assert VERDICT_WORDS["retry"] in queue  # "retry: retry_delivery", in words
    assert action.reply_key[:12] in queue
