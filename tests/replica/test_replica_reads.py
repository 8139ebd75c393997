"""A streaming replica serves the read API and the admin's list pages; writes stay on the primary."""

from __future__ import annotations

import json
import re

import pytest
from django.db import InternalError, NotSupportedError, OperationalError, ProgrammingError, transaction

from tests.conftest import fixture_body

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "replica"])


def _event_keys(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["event_key"] for row in response.json()["results"]]


def _body(n: int) -> bytes:
    body = json.loads(fixture_body("comment__northstar"))
    event = body["events"][0]
    event.update(id=f"evt_test_rep{n}", comment_id=f"msg_test_rep{n}")
    return json.dumps(body).encode()


def test_the_read_api_reads_the_replica(replica, sandbox_source, deliver, api):
    """docs/scaling.md#replica: "DATABASE_REPLICA_URL routes the read API ... to a streaming replica".

    With replay paused, a row committed on the primary is absent from /api/events/ and
    /api/quarantine/ until the replica replays it; a browser pinned to the primary sees it at once.
    """
    assert deliver(_body(1)).status_code == 200
    replica.caught_up()
    first = _event_keys(api.get("/api/events/"))
    assert len(first) == 1

    replica.pause()
    assert deliver(_body(2)).status_code == 200  # on the primary, not yet on the replica
    assert deliver(b"{}", headers={}).status_code == 401  # an unsigned delivery: a quarantine receipt
    assert _event_keys(api.get("/api/events/")) == first
    assert api.get("/api/quarantine/").json()["results"] == []
    # Positive control: the same request read from the primary (a pinned browser) has both.
    api.cookies["conduit_read_primary"] = "1"
    assert len(_event_keys(api.get("/api/events/"))) == 2
    assert len(api.get("/api/quarantine/").json()["results"]) == 1
    del api.cookies["conduit_read_primary"]

    replica.resume()
    replica.caught_up()
    assert len(_event_keys(api.get("/api/events/"))) == 2
    assert len(api.get("/api/quarantine/").json()["results"]) == 1


def test_the_replica_refuses_writes_and_the_router_never_chooses_it_for_one(replica, wire, planned):
    """docs/scaling.md#replica: "every write, claim, lease and transition stays on the primary"."""
    from django.db import router

    from conduit import routers
    from ingress.models import InboundEvent
    from replies.models import ReplyAction
    from replies.services import reply_approve

    wire()  # approved copy for both purposes
    action, _ = planned()
    replica.caught_up()
    # The replica is a real hot standby: any write there raises.
    with pytest.raises(
        (InternalError, NotSupportedError, OperationalError, ProgrammingError), match="read-only transaction"
    ):
        with transaction.atomic(using="replica"):
            InboundEvent.objects.using("replica").update(seen_count=5)
    # Inside a list page (the router's replica flag on), writes still go to the primary ...
    token = routers._replica_reads.set(True)
    try:
        assert router.db_for_write(ReplyAction) == "default"
        assert router.db_for_read(ReplyAction) == "replica"
        assert reply_approve(action_id=action.pk, actor="reviewer_test").ok  # raised were it on the replica
    finally:
        routers._replica_reads.reset(token)
    assert ReplyAction.objects.get(pk=action.pk).delivery_state == "APPROVED"
    # ... and outside one, every read is the primary's.
    assert router.db_for_read(ReplyAction) == "default"
    assert ReplyAction.objects.all().db == "default"


SELECTED = re.compile(r'name="_selected_action" value="(\d+)"')


def test_admin_lists_read_the_replica_and_the_page_after_an_action_reads_the_primary(
    replica,
    wire,
    planned,
    client,
    django_user_model,
):
    """docs/scaling.md#replica: "a page that must read its own write (after an admin action) reads the primary".

    The review queue is read from the replica; after approving one reply the reviewer's
    redirected page comes from the primary (the action's result is shown at once), while another
    reviewer's page, unpinned, still shows the replica's (paused) view until it replays.
    """
    from django.test import Client

    wire()
    public_ack, private = planned()
    reviewer = django_user_model.objects.create_superuser("reviewer_test", password="unused-test-password")
    other = Client()
    other.force_login(
        django_user_model.objects.create_superuser("other_test", password="unused-test-password")
    )
    client.force_login(reviewer)
    replica.caught_up()  # the users and sessions are on the primary only (never read from the replica)
    queue = "/admin/replies/reviewqueue/"
    pending = {str(public_ack.pk), str(private.pk)}
    assert set(SELECTED.findall(client.get(queue).content.decode())) == pending

    replica.pause()
    # The confirmation carries the copy version it showed (v1, the only one).
    response = client.post(
        queue,
        {
            "action": "approve",
            "_selected_action": [public_ack.pk],
            "confirm": "yes",
            f"pin_{public_ack.pk}": "v1",
        },
        follow=True,
    )
    assert response.redirect_chain and response.status_code == 200
    assert "conduit_read_primary" in response.cookies or "conduit_read_primary" in client.cookies
    # The reviewer's own page: the primary, the approved reply gone from the queue.
    assert set(SELECTED.findall(response.content.decode())) == {str(private.pk)}
    # Someone else's: the replica, which has not replayed the approval yet.
    assert set(SELECTED.findall(other.get(queue).content.decode())) == pending

    replica.resume()
    replica.caught_up()
    assert set(SELECTED.findall(other.get(queue).content.decode())) == {str(private.pk)}
