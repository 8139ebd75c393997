"""Meta as it really answers, end to end on PostgreSQL: a sent reply stays SENT through complete
scans, a DM is read back, a Page paged by time reconciles, an edit is one comment, a person's own
comment is not Conduit's reply, a DM plans nothing a comment route would send, and the refusals
Meta documents are not-sent outcomes.

The simulator posts signed notifications to the live test server; `notify: False` is a webhook
that never came. Every connection the test makes stays on this host.
"""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from conduit.providers.meta import graph as meta_graph
from conduit.providers.meta import reader as meta_reader
from conduit.providers.meta.graph import GraphResponse
from conduit.providers.meta.transport import MetaPrivateReplyTransport
from ingress.models import InboundEvent, SelfAuthoredItem
from reconcile.models import Finding, ReconcileReport
from reconcile.scan import scan_until_done
from replies.models import ReplyAction
from replies.sender import reply_send
from replies.services import reply_approve, reply_copy_create, reply_route_declare
from tests.providers.meta.integration.conftest import APP_ID, IG_ACCOUNT, PAGE_ACCOUNT, register_meta

# The Graph simulator posting to the live server, and the guard failing any connection off this host.
from tests.providers.meta.integration.test_reconcile import graph, loopback_only, sim  # noqa: F401 (fixtures)

BUYER = "17841400000000901"
COPY = {"public_ack": "Thanks! Sent you the details.", "private_delivery": "Here is the price list."}
ROUTES = {"public_ack": "meta-comment-reply", "private_delivery": "meta-private-reply"}
pytestmark = pytest.mark.django_db(transaction=True)


def source_with_routes(graph, kind: str, purposes=("public_ack", "private_delivery")):
    account = IG_ACCOUNT if kind == "instagram" else PAGE_ACCOUNT
    url = graph.instagram_url if kind == "instagram" else graph.url
    sim(graph, "/_sim/accounts", {"id": account, "object": kind, "app_id": APP_ID})
    source = register_meta(f"{kind}-test", f"meta-{kind}", account, graph_url=url, purposes=list(purposes))
    for purpose in purposes:
        reply_route_declare(
            source_id=source.pk, purpose=purpose, transport_name=ROUTES[purpose], target_url=url
        )
        reply_copy_create(
            source_id=source.pk, purpose=purpose, channel=purpose, text=COPY[purpose], actor="test"
        )
    return source


def where(kind: str) -> dict:
    return (
        {"media_id": "18000000000000001"}
        if kind == "instagram"
        else {"post_id": f"{PAGE_ACCOUNT}_1000000000000001"}
    )


def comment(graph, source, kind: str, text: str, *, notify: bool = True, sender: str = BUYER, **extra) -> str:
    return sim(
        graph,
        "/_sim/comments",
        {
            "account": source.account_ref,
            **where(kind),
            "text": text,
            "from_id": sender,
            "notify": notify,
            **extra,
        },
    )["id"]


def scan(source):
    outcome = scan_until_done(source=source, trigger="command", actor="tester")
    assert outcome.state == "published", outcome
    return ReconcileReport.objects.filter(source=source).latest("id")


def doctor_row(source) -> dict:
    out = StringIO()
    try:
        call_command("doctor", "--json", "--no-meta-check", stdout=out)
    except SystemExit:
        pass
    return next(row for row in json.loads(out.getvalue()) if row["source"] == source.name)


def approve_and_send(actions) -> None:
    for action in actions:
        assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
        assert reply_send(action_id=action.pk) == "SENT", action.purpose


# -- 1. a sent reply stays SENT --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["instagram", "page"])
def test_sent_public_and_private_replies_stay_sent_through_two_complete_scans(graph, kind):
    """A sent Meta reply is not demoted by the next complete scan: its receipt is read back, so SENT
    never looks 'SENT without a provider receipt', and the scan after adds no RETRY_CANDIDATE."""
    source = source_with_routes(graph, kind)
    comment(graph, source, kind, "price please")
    actions = list(ReplyAction.objects.order_by("purpose"))
    assert [a.purpose for a in actions] == ["private_delivery", "public_ack"]
    approve_and_send(actions)

    for _ in range(2):
        report = scan(source)
        counts = report.summary["counts"]
        assert {a.purpose: a.delivery_state for a in ReplyAction.objects.all()} == {
            "private_delivery": "SENT",
            "public_ack": "SENT",
        }
        # The public reply's own comment read back is its receipt, the private reply's message in the
        # conversation (matched by the id Meta answered the send with) is its.
        assert counts["sent_without_receipt"] == 0 and counts["retry_candidates"] == 0
        assert counts["replies_confirmed"] == 2 and counts["receipts_not_compared"] == 0
    assert not Finding.objects.filter(
        kind__in=["RECEIPT_MISSING", "RETRY_CANDIDATE", "UNEXPECTED_RECEIPT"]
    ).exists()
    row = doctor_row(source)
    assert (row["unknown_sends"], row["retry_candidates"], row["unexpected_receipts"]) == (0, 0, 0)
    assert {f["event_type"]: f["recovery"] for f in row["families"]}["message.created"] == "limited"


def test_a_private_reply_the_read_cannot_show_is_not_compared_and_stays_sent(graph):
    """docs/platforms/meta.md#receipts: "Where a family's receipts cannot be read, reconciliation leaves SENT actions alone and
    says in the report that they were not compared: 'not compared' is not 'missing'". The token may not
    read conversations (Meta refuses the list): the private reply has no receipt and stays SENT."""
    source = source_with_routes(graph, "instagram")
    comment(graph, source, "instagram", "price please")
    approve_and_send(ReplyAction.objects.order_by("purpose"))
    sim(
        graph,
        "/_sim/faults",
        {
            "mode": "error",
            "code": 10,
            "status": 403,
            "method": "GET",
            "path_contains": "/conversations",
            "count": 10,
        },
    )
    for _ in range(2):
        counts = scan(source).summary["counts"]
        assert counts["receipts_not_compared"] == 1 and counts["sent_without_receipt"] == 0
    assert set(ReplyAction.objects.values_list("delivery_state", flat=True)) == {"SENT"}


def test_positive_control_without_receipt_transports_the_sent_reply_is_demoted(graph, monkeypatch):
    """Break the guard (the reader declares no transport it reads, as before: every action compared,
    no receipts): the same scan demotes the sent replies, which the test above would catch."""
    source = source_with_routes(graph, "instagram")
    comment(graph, source, "instagram", "price please")
    approve_and_send(ReplyAction.objects.order_by("purpose"))
    monkeypatch.setattr(meta_reader._GraphFanOutReader, "receipt_transports", None)
    monkeypatch.setattr("reconcile.scan.evidence.own_item_receipts", lambda **kw: [])
    scan(source)
    assert set(ReplyAction.objects.values_list("delivery_state", flat=True)) == {"SEND_STATUS_UNKNOWN"}


# -- 2. a 164-character Instagram message id --------------------------------------------------------


INSTAGRAM_MID = (
    "aWdfZAG1faXRlbToxOklHTWVzc2FnZAUlEOjE3ODQxNDAwMDAwMDAwMDAxOjM0MDI4MjM2Njg0MTcxMDMwMDk0OTEy"
    "ODE2NzY1MDYxNzg0ODE3NjozMTk0NTg2MDI4NDIzNjA4NDYwNDYwNjQ2NDU3MzM3MDgxNgZDZD"
)


def test_an_instagram_private_reply_answered_with_a_164_character_message_id_is_a_receipt(monkeypatch):
    """Instagram answers {"recipient_id", "message_id"} with a message id of about 164 characters;
    the transport reads it as a receipt, not as `unreadable_receipt` (which would park it unknown)."""
    assert len(INSTAGRAM_MID) == 164
    from conduit.providers.base import OutboundReply

    monkeypatch.setattr(
        "conduit.providers.meta.transport.graph_request",
        lambda **kw: GraphResponse({"recipient_id": BUYER, "message_id": INSTAGRAM_MID}, 240),
    )
    transport = MetaPrivateReplyTransport(
        "http://127.0.0.1:9/instagram/v25.0", token="t", account_ref=IG_ACCOUNT, object="instagram"
    )
    receipt = transport.send(
        OutboundReply(
            reply_key="a" * 64,
            event_key="k",
            purpose="private_delivery",
            channel="dm",
            copy_version="v1",
            text="hi",
            conversation_ref="m",
            message_ref="17900000000000001",
        )
    )
    assert receipt.provider_reply_id == INSTAGRAM_MID


def test_a_sent_instagram_private_reply_keeps_its_long_message_id(graph):
    source = source_with_routes(graph, "instagram", purposes=("private_delivery",))
    comment(graph, source, "instagram", "price please")
    (action,) = ReplyAction.objects.all()
    approve_and_send([action])
    action.refresh_from_db()
    assert action.delivery_state == "SENT" and len(action.provider_reply_id) > 128


# -- 3. a Page paged by time -----------------------------------------------------------------------


def test_a_page_with_three_pages_of_time_paged_posts_reconciles_to_completion(graph, settings):
    """A /feed page whose paging has previous/next with since/until and no cursors is read, not
    refused as malformed_page (which would leave the run stuck SCANNING, every rerun failing there)."""
    source = source_with_routes(graph, "page", purposes=("public_ack",))
    posts = [f"{PAGE_ACCOUNT}_{1000000000000001 + n}" for n in range(3 * meta_reader.LIST_PAGE_SIZE)]
    missed = [
        sim(
            graph,
            "/_sim/comments",
            {
                "account": PAGE_ACCOUNT,
                "post_id": post,
                "text": f"hello {n}",
                "from_id": BUYER,
                "notify": False,
            },
        )["id"]
        for n, post in enumerate(posts)
    ]
    calls = []
    real = meta_reader.graph_get

    def recording(**kwargs):
        response = real(**kwargs)
        if kwargs["path"].endswith("/feed"):
            calls.append(response.document.get("paging", {}))
        return response

    meta_reader.graph_get = recording
    try:
        report = scan(source)
    finally:
        meta_reader.graph_get = real
    assert report.summary["counts"]["missing_recovered"] == len(missed)
    assert set(InboundEvent.objects.values_list("message_ref", flat=True)) == set(missed)
    # The simulator pages /feed by time, as Meta does: the reader followed `next` without cursors.
    assert len(calls) >= 3 and all("cursors" not in paging for paging in calls)
    assert all("until=" in paging["next"] for paging in calls if paging.get("next"))


# -- 4. DMs read back --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["instagram", "page"])
def test_a_webhook_dm_is_matched_and_a_missed_dm_is_recovered_by_the_conversations_api(graph, kind):
    """DMs are read back: a scan does not flag them SOURCE_UNVERIFIED, and a DM whose webhook never
    came is recovered."""
    source = source_with_routes(graph, kind, purposes=("public_ack",))
    account = source.account_ref
    delivered = sim(
        graph,
        "/_sim/messages",
        {"account": account, "object": kind, "from_id": BUYER, "text": "hi there", "notify": True},
    )["mid"]
    missed = sim(
        graph,
        "/_sim/messages",
        {
            "account": account,
            "object": kind,
            "from_id": "17841400000000902",
            "text": "hello?",
            "notify": False,
        },
    )["mid"]
    assert set(InboundEvent.objects.values_list("message_ref", flat=True)) == {delivered}
    for _ in range(2):
        report = scan(source)
        assert report.summary["counts"]["source_unverified"] == 0
        assert report.summary["counts"]["identity_conflicts"] == 0
    events = {e.message_ref: e for e in InboundEvent.objects.all()}
    assert set(events) == {delivered, missed}
    assert events[delivered].reconcile_status == "MATCHED"
    assert not Finding.objects.filter(kind="SOURCE_UNVERIFIED").exists()


# -- 5. one comment, one pair of replies ---------------------------------------------------------------


def test_an_edited_comment_is_one_pair_of_replies_and_never_an_identity_conflict(graph):
    """An edit plans no second pair of replies (which would be two public replies on one comment once
    both were approved), and a later scan reports neither IDENTITY_CONFLICT on the original comment
    (the read returns the current text) nor SOURCE_UNVERIFIED on the edit."""
    source = source_with_routes(graph, "page")
    first = comment(graph, source, "page", "price please")
    assert ReplyAction.objects.count() == 2
    sim(
        graph,
        "/_sim/comments",
        {
            "account": PAGE_ACCOUNT,
            "post_id": where("page")["post_id"],
            "id": first,
            "from_id": BUYER,
            "verb": "edited",
            "text": "price please, for two",
            "notify": True,
        },
    )
    assert InboundEvent.objects.filter(event_type="comment.edited").count() == 1
    assert ReplyAction.objects.count() == 2  # the edit planned nothing
    # A second edit whose webhook never came: the read shows its text, recovered as its edit event.
    sim(
        graph,
        "/_sim/comments",
        {
            "account": PAGE_ACCOUNT,
            "post_id": where("page")["post_id"],
            "id": first,
            "from_id": BUYER,
            "verb": "edited",
            "text": "price please, for three",
            "notify": False,
        },
    )
    for _ in range(2):
        counts = scan(source).summary["counts"]
        assert counts["identity_conflicts"] == 0 and counts["source_unverified"] == 0
    assert InboundEvent.objects.filter(event_type="comment.edited").count() == 2
    assert ReplyAction.objects.count() == 2
    assert not Finding.objects.filter(kind__in=["IDENTITY_CONFLICT", "SOURCE_UNVERIFIED"]).exists()


def test_a_dm_with_the_trigger_word_plans_no_comment_reply(graph):
    """An Instagram DM with the trigger word plans neither public_ack nor private_delivery, which would
    both fail after approval (a DM has no comment to answer)."""
    source = source_with_routes(graph, "instagram")
    sim(
        graph,
        "/_sim/messages",
        {"account": source.account_ref, "from_id": BUYER, "text": "price?", "notify": True},
    )
    event = InboundEvent.objects.get(event_type="message.created")
    assert event.event_state == "CLOSED_NO_REPLY" and not ReplyAction.objects.exists()
    assert event.transitions.filter(next_state="CLOSED_NO_REPLY").get().reason_code == "no_reply_answers"


# -- 6. a person's own comment is not Conduit's reply ----------------------------------------------------


def test_a_persons_own_different_comment_under_a_timed_out_reply_leaves_it_unknown(graph):
    """A reply times out before Meta applies it; a person then answers under the same comment by
    hand, and the evidence rule does not take that comment for Conduit's reply (SENT)."""
    source = source_with_routes(graph, "instagram", purposes=("public_ack",))
    target = comment(graph, source, "instagram", "price please")
    (action,) = ReplyAction.objects.all()
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    sim(graph, "/_sim/faults", {"mode": "timeout", "method": "POST", "hang_seconds": 2})
    assert reply_send(action_id=action.pk) == "SEND_STATUS_UNKNOWN"
    assert sim(graph, "/_sim/applied", method="GET")["public"] == {}
    own = comment(
        graph, source, "instagram", "Hi! I'll DM you now.", sender=source.account_ref, parent_id=target
    )
    assert SelfAuthoredItem.objects.filter(provider_id=own).exists()  # the webhook came
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN"
    scan(source)
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN" and action.provider_reply_id == ""


def test_the_accounts_own_comment_with_the_approved_text_resolves_the_unknown_reply(graph):
    """The other side of the rule: the account's own comment carrying the approved copy under the
    comment is the reply's receipt (the reply applied behind a lost answer)."""
    source = source_with_routes(graph, "instagram", purposes=("public_ack",))
    comment(graph, source, "instagram", "price please")
    (action,) = ReplyAction.objects.all()
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    # No webhook of the reply comment comes (the app lost its subscription): only the scan can see it.
    sim(graph, "/_sim/subscriptions", {"account": source.account_ref, "app_id": APP_ID, "fields": []})
    sim(graph, "/_sim/faults", {"mode": "apply_then_timeout", "hang_seconds": 2})
    assert reply_send(action_id=action.pk) == "SEND_STATUS_UNKNOWN"
    assert sim(graph, "/_sim/applied", method="GET")["public"] != {}
    report = scan(source)
    action.refresh_from_db()
    assert action.delivery_state == "SENT" and action.provider_reply_id
    assert report.summary["counts"]["receipts_attached"] == 1


# -- 8. refusals that applied nothing ------------------------------------------------------------------


@pytest.mark.parametrize("code", [3, 200, 230])
def test_a_documented_refusal_is_failed_before_send_never_unknown(graph, code):
    """Codes 3 (capability) and 200-299 (permissions) are refused sends, not ambiguous ones: Meta's
    error-handling guide says the call was refused (docs/platforms/meta.md#error-meanings)."""
    source = source_with_routes(graph, "instagram", purposes=("private_delivery",))
    comment(graph, source, "instagram", "price please")
    (action,) = ReplyAction.objects.all()
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    sim(
        graph,
        "/_sim/faults",
        {"mode": "error", "code": code, "status": 403 if code >= 200 else 400, "method": "POST"},
    )
    assert reply_send(action_id=action.pk) == "FAILED_BEFORE_SEND"
    action.refresh_from_db()
    assert action.next_attempt_at is None and action.last_error_code in (
        "capability_missing",
        "permission_missing",
    )


def test_next_params_follows_time_cursor_and_offset_paging():
    """Graph pages three ways (graph-api/results): `next` is followed as given, `cursors` never required."""
    base = "https://graph.facebook.com/v4.0/1/feed"
    assert meta_graph.next_params(
        {"paging": {"next": f"{base}?access_token=x&limit=25&until=1510092433&__paging_token=enc_AbC"}}
    ) == {"until": "1510092433", "__paging_token": "enc_AbC"}
    assert meta_graph.next_params({"paging": {"cursors": {"after": "QVF"}, "next": f"{base}?after=QVF"}}) == {
        "after": "QVF"
    }
    assert meta_graph.next_params({"paging": {"next": f"{base}?offset=50&limit=25"}}) == {"offset": "50"}
    assert meta_graph.next_params({"paging": {"previous": f"{base}?since=1"}}) is None
    with pytest.raises(ValueError):
        meta_graph.next_params({"paging": {"next": f"{base}?access_token=x"}})


def test_a_dm_refused_beside_an_invalid_sibling_is_found_again_by_the_scan(graph, client):
    """docs/concepts/event-contract.md#batches refuses a share with an invalid member whole; a valid DM
    refused so is recovered, since the Conversations API shows it again."""
    from conduit.providers.meta.webhook import signature_header
    from ingress.models import QuarantineReceipt
    from tests.providers.meta.integration.conftest import APP_SECRET

    source = source_with_routes(graph, "instagram", purposes=("public_ack",))
    valid = sim(
        graph,
        "/_sim/messages",
        {"account": source.account_ref, "from_id": BUYER, "text": "hello", "notify": False},
    )["mid"]
    body = json.dumps(
        {
            "object": "instagram",
            "entry": [
                {
                    "id": source.account_ref,
                    "time": 1764583200,
                    "messaging": [
                        {
                            "sender": {"id": BUYER},
                            "recipient": {"id": source.account_ref},
                            "timestamp": 1764583200000,
                            "message": {"mid": valid, "text": "hello"},
                        },
                        {
                            "sender": {"id": BUYER},
                            "recipient": {"id": source.account_ref},
                            "timestamp": 1764583200000,
                            "message": {"text": "no mid"},
                        },
                    ],
                }
            ],
        }
    ).encode()
    response = client.post(
        f"/webhooks/meta/{APP_ID}/",
        data=body,
        content_type="application/json",
        headers={"X-Hub-Signature-256": signature_header(body=body, secret=APP_SECRET)},
    )
    assert response.status_code == 200
    assert not InboundEvent.objects.exists() and QuarantineReceipt.objects.exists()
    assert scan(source).summary["counts"]["missing_recovered"] == 1
    assert InboundEvent.objects.get().message_ref == valid


def test_the_sources_admin_page_shows_the_declared_families(graph, admin_client):
    """docs/concepts/reconciliation.md#families: "`doctor` and the source's admin page show the
    declaration" (docs/concepts/reconciliation.md#inspection)."""
    source = source_with_routes(graph, "page", purposes=("public_ack",))
    page = admin_client.get(f"/admin/ingress/source/{source.pk}/change/").content.decode()
    assert "Declared event families" in page
    assert "comment.removed</code>: recovery <b>none</b>" in page
    assert "message.created</code>: recovery <b>limited</b>" in page
    assert "Receipts compared for: meta-comment-reply" in page
