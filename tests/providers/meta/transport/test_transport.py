"""The Meta transports against the Graph simulator: every outcome, what the simulator applied, lookups, echoes."""

from __future__ import annotations

import json
import socket
import time

import pytest

from conduit.providers.base import CALLS, Ambiguous, NotSent
from conduit.providers.meta import errors, graph, receipt_lookup
from conduit.providers.meta.transport import (
    ALREADY_REPLIED,
    PRIVATE_REPLY_CONVERSATION,
    REPLY_CREATED,
    REPLY_READ_BACK,
    MetaAmbiguous,
    MetaCommentReplyTransport,
    MetaNotSent,
    MetaPrivateReplyTransport,
    MetaReceipt,
)
from tests.providers.meta.transport.support import (
    IG,
    KINDS,
    PAGE,
    TOKEN,
    applied,
    comment,
    control,
    fault,
    loopback_guard,
    outside_hosts,
    reply_for,
    transport,
)

ALL = list(KINDS)


def kind_of(kind: str) -> tuple[str, str]:
    """("public"|"private", "instagram"|"page")."""
    visibility, object = kind.split("-")
    return visibility, object


def send_once(sim, kind: str):
    """One send to a fresh comment: (the comment id, the outcome: a Receipt or the exception raised)."""
    _, object = kind_of(kind)
    target = comment(sim, object)
    try:
        return target, transport(sim, kind).send(reply_for(target, purpose=kind))
    except (NotSent, Ambiguous) as exc:
        return target, exc


# -- success -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ALL)
def test_a_graph_answer_with_an_id_is_a_receipt_and_one_apply(sim, kind):
    visibility, _ = kind_of(kind)
    target, outcome = send_once(sim, kind)
    assert (
        isinstance(outcome, MetaReceipt) and outcome.evidence == REPLY_CREATED and outcome.http_status == 200
    )
    assert applied(sim, target)[visibility] == {target: 1}
    other = "private" if visibility == "public" else "public"
    assert applied(sim, target)[other] == {}


def test_public_replies_take_each_platforms_route(sim):
    """docs/platforms/meta.md#transports: 'Instagram POST /{ig-comment-id}/replies with message; Facebook POST /{comment-id}/comments'."""
    for kind in ("public-instagram", "public-page"):
        transport(sim, kind).send(reply_for(comment(sim, kind_of(kind)[1]), purpose=kind))
    paths = [(c["method"], c["path"]) for c in control(sim, "calls")["log"]]
    assert (
        paths[0][0] == "POST"
        and paths[0][1].startswith("/instagram/v26.0/")
        and paths[0][1].endswith("/replies")
    )
    assert paths[1][0] == "POST" and paths[1][1].startswith("/v26.0/") and paths[1][1].endswith("/comments")


def test_private_replies_go_to_the_accounts_messages_edge(sim):
    for kind, node in (
        ("private-instagram", f"/instagram/v26.0/{IG}/messages"),
        ("private-page", f"/v26.0/{PAGE}/messages"),
    ):
        transport(sim, kind).send(reply_for(comment(sim, kind_of(kind)[1]), purpose=kind))
        assert control(sim, "calls")["log"][-1]["path"] == node


def test_the_receipt_is_the_reply_the_graph_shows(sim):
    target = comment(sim, "instagram")
    receipt = transport(sim, "public-instagram").send(reply_for(target, text="See you there"))
    thread = graph.graph_get(
        base_url=sim.url,
        path=f"{target}/replies",
        params={"fields": "id,text,from{id}"},
        access_token=TOKEN,
        timeout=2,
    ).document["data"]
    assert [(r["id"], r["text"], r["from"]["id"]) for r in thread] == [
        (receipt.provider_reply_id, "See you there", IG)
    ]


# -- every Graph error through both transports --------------------------------------------------

# (code, subcode, status or None = the simulator's default, expected class, reason, retryable)
FAULTS = [
    (4, None, None, MetaNotSent, "throttled", True),
    (17, None, None, MetaNotSent, "throttled", True),
    (32, None, None, MetaNotSent, "throttled", True),
    (613, None, None, MetaNotSent, "throttled", True),
    (613, 2534040, None, MetaNotSent, "throttled", True),
    (80001, None, None, MetaNotSent, "throttled", True),
    (80002, None, None, MetaNotSent, "throttled", True),
    (80006, None, None, MetaNotSent, "throttled", True),
    (190, None, None, MetaNotSent, "token_invalid", False),
    (10, 2534022, None, MetaNotSent, "window_expired", False),
    (10, 2018278, None, MetaNotSent, "window_expired", False),
    (100, 2534025, None, MetaNotSent, "not_private_replyable", False),
    (100, 33, None, MetaNotSent, "object_gone", False),
    (10, 1893063, None, MetaNotSent, "page_restricted", False),
    (200, 2534041, None, MetaNotSent, "messages_disabled", False),
    (200, 1545041, None, MetaNotSent, "person_unavailable", False),
    (551, None, None, MetaNotSent, "person_unavailable", False),
    (10900, None, None, MetaReceipt, "already_replied", None),
    (1, None, None, MetaAmbiguous, "graph_server_error", None),  # the simulator answers 1 with a 500
    (1, None, 400, MetaAmbiguous, "graph_unknown_error", None),
    (2, None, None, MetaAmbiguous, "graph_server_error", None),
    (2, None, 400, MetaAmbiguous, "graph_unexpected_error", None),
    (20, 1772107, None, MetaAmbiguous, "graph_refused_after_apply", None),
    (4, None, 503, MetaAmbiguous, "graph_server_error", None),
    (12345, None, 400, MetaAmbiguous, "graph_unknown_code", None),
    (10, 999, None, MetaAmbiguous, "graph_unknown_code", None),
]


def check_error_outcome(sim, kind, code, subcode, status, cls, reason, retryable) -> None:
    """One `error` fault (Meta answers the error and applies nothing): the outcome the table names."""
    fault(sim, mode="error", code=code, subcode=subcode, status=status, count=1, method="POST")
    target, outcome = send_once(sim, kind)
    assert isinstance(outcome, cls), (kind, code, subcode, outcome)
    if cls is MetaReceipt:
        assert (
            outcome.evidence == ALREADY_REPLIED and outcome.provider_reply_id == f"already_replied:{target}"
        )
    else:
        assert outcome.code == reason
    if cls is MetaNotSent:
        assert outcome.reached and outcome.retryable is retryable
        assert outcome.stop_source is (code == 190)
        assert outcome.sentence
    assert applied(sim, target) == {"public": {}, "private": {}}  # nothing was applied, whatever it means


@pytest.mark.parametrize("kind", ALL)
@pytest.mark.parametrize("code,subcode,status,cls,reason,retryable", FAULTS)
def test_every_error_code_through_both_transports(sim, kind, code, subcode, status, cls, reason, retryable):
    """The error meanings (docs/platforms/meta.md#error-meanings), each answered by the simulator to each transport."""
    check_error_outcome(sim, kind, code, subcode, status, cls, reason, retryable)


def test_throttling_carries_the_announced_wait(sim):
    """docs/platforms/meta.md#send-budgets: 'X-Business-Use-Case-Usage carries estimated_time_to_regain_access'."""
    fault(sim, mode="error", code=80002, retry_minutes=7, count=1)
    _, outcome = send_once(sim, "private-instagram")
    assert isinstance(outcome, MetaNotSent) and outcome.retry_after == 7 * 60


# -- no answer, and answers after the reply was applied -----------------------------------------


@pytest.mark.parametrize("kind", ALL)
@pytest.mark.parametrize(
    "mode,code,expected",
    [
        ("timeout", None, "timeout_after_request"),
        ("drop", None, "connection_lost_after_request"),
    ],
)
def test_no_answer_is_ambiguous_and_nothing_applied(sim, kind, mode, code, expected):
    """docs/replies.md#outcomes: 'A timeout after the external request creates SEND_STATUS_UNKNOWN.'"""
    fault(sim, mode=mode, count=1)
    target, outcome = send_once(sim, kind)
    assert isinstance(outcome, MetaAmbiguous) and outcome.code == expected
    assert applied(sim, target) == {"public": {}, "private": {}}


@pytest.mark.parametrize("kind", ALL)
@pytest.mark.parametrize(
    "mode,code,subcode,expected",
    [
        ("apply_then_timeout", None, None, "timeout_after_request"),
        ("apply_then_drop", None, None, "connection_lost_after_request"),
        ("apply_then_error", 20, 1772107, "graph_refused_after_apply"),
        ("apply_then_error", 2, None, "graph_server_error"),
        ("apply_then_error", 12345, None, "graph_unknown_code"),
    ],
)
def test_applied_then_no_clear_answer_is_ambiguous_and_applied_once(sim, kind, mode, code, subcode, expected):
    """docs/platforms/meta.md#error-meanings: 'A 4xx does not always mean "not applied": an integration saw 20/1772107 after the Instagram
    comment had been created.' The simulator applied the reply once; the transport says it may have."""
    visibility, _ = kind_of(kind)
    fault(sim, mode=mode, code=code or 2, subcode=subcode, count=1)
    target, outcome = send_once(sim, kind)
    assert isinstance(outcome, MetaAmbiguous) and outcome.code == expected
    assert applied(sim, target)[visibility] == {target: 1}


@pytest.mark.parametrize("kind", ALL)
def test_a_connection_that_never_opened_is_not_sent(sim, kind):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cls, object = KINDS[kind]
    closed = cls(f"http://127.0.0.1:{port}/v26.0", token=TOKEN, account_ref=PAGE, object=object, timeout=1)
    with pytest.raises(MetaNotSent) as caught:
        closed.send(reply_for("179000000000001"))
    assert caught.value.code == "connect_failed" and not caught.value.reached and caught.value.retryable


@pytest.mark.parametrize("kind", ALL)
def test_an_unreadable_answer_is_ambiguous(sim, kind, monkeypatch):
    """docs/platforms/meta.md#error-meanings: 'Ambiguous: ... unreadable bodies.' An answer of 200 without the id."""
    from conduit.providers.meta import transport as module

    monkeypatch.setattr(module, "graph_request", lambda **kw: graph.GraphResponse({"success": True}, 16))
    _, outcome = send_once(sim, kind)
    assert isinstance(outcome, MetaAmbiguous) and outcome.code == "unreadable_receipt"


def test_no_token_sends_nothing(sim):
    target = comment(sim, "instagram")
    control(sim, "calls", method="DELETE")
    with pytest.raises(MetaNotSent) as caught:
        transport(sim, "public-instagram", token="").send(reply_for(target))
    assert caught.value.code == "graph_token_unavailable" and not caught.value.reached
    assert control(sim, "calls")["calls"] == 0


# -- one private reply per comment --------------------------------------------------------------


@pytest.mark.parametrize("kind", ["private-instagram", "private-page"])
def test_a_second_private_reply_is_already_replied_evidence_not_a_second_apply(sim, kind):
    """docs/platforms/meta.md#transports: 'At most one per comment'; 'known "already holds a reply" -> SENT with that evidence'."""
    target = comment(sim, kind_of(kind)[1])
    first = transport(sim, kind).send(reply_for(target, purpose="private_delivery"))
    second = transport(sim, kind).send(reply_for(target, purpose="private_delivery"))
    assert first.evidence == REPLY_CREATED and second.evidence == ALREADY_REPLIED
    assert applied(sim, target)["private"] == {target: 1}


def test_already_replied_by_message_text_is_read_through_the_hint_graph_keeps(sim, monkeypatch):
    """docs/platforms/meta.md#error-meanings: 'match the message text as well', through what Graph
    errors carry: graph.graph_error keeps errors.message_hint of Meta's text (never the text), so a
    text-only answer is already-replied evidence; positive control: without the hint
    it would be ambiguous."""
    fault(sim, mode="error", code=100, message="(#100) Activity already replied to", count=1)
    target, outcome = send_once(sim, "private-page")
    assert isinstance(outcome, MetaReceipt) and outcome.evidence == ALREADY_REPLIED
    assert applied(sim, target)["private"] == {}

    real = graph.graph_error

    def without_hint(status, payload, headers, *, had_cursor):  # the dead path as it was
        error = real(status, payload, headers, had_cursor=had_cursor)
        error.message_hint = ""
        return error

    monkeypatch.setattr(graph, "graph_error", without_hint)
    fault(sim, mode="error", code=100, message="(#100) Activity already replied to", count=1)
    _, outcome = send_once(sim, "private-page")
    assert isinstance(outcome, MetaAmbiguous) and outcome.code == "graph_unknown_code"


# -- receipt lookup -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["public-instagram", "public-page"])
def test_lookup_finds_the_public_reply_it_sent_and_none_for_one_it_did_not(sim, kind):
    """docs/concepts/ledgers.md#recovery: 'Receipt lookup without idempotent send: Reconcile first. Retry only after evidence shows
    no send'. A reply applied behind a timeout is found; a reply never sent is None."""
    object = kind_of(kind)[1]
    sent, unsent = comment(sim, object), comment(sim, object, media="2")
    fault(sim, mode="apply_then_timeout", count=1)
    the_transport = transport(sim, kind)
    reply = reply_for(sent)
    with pytest.raises(MetaAmbiguous):
        the_transport.send(reply)
    found = the_transport.lookup(reply.reply_key, reply)
    assert isinstance(found, MetaReceipt) and found.evidence == REPLY_READ_BACK
    thread_edge = "replies" if object == "instagram" else "comments"
    thread = graph.graph_get(
        base_url=sim.url, path=f"{sent}/{thread_edge}", params={"fields": "id"}, access_token=TOKEN, timeout=2
    ).document["data"]
    assert [r["id"] for r in thread] == [found.provider_reply_id]
    never = reply_for(unsent, event="evt_test_0043")
    assert the_transport.lookup(never.reply_key, never) is None


def test_lookup_ignores_other_replies_by_the_account(sim):
    target = comment(sim, "instagram")
    transport(sim, "public-instagram").send(reply_for(target, text="Something else entirely"))
    reply = reply_for(target)
    assert transport(sim, "public-instagram").lookup(reply.reply_key, reply) is None


def test_lookup_reads_every_page_of_the_thread(sim, monkeypatch):
    from conduit.providers.meta import receipt_lookup as module

    monkeypatch.setattr(module, "LOOKUP_PAGE_SIZE", 2)
    target = comment(sim, "page")
    reply = reply_for(target)
    receipt = transport(sim, "public-page").send(reply)
    for n in range(4):
        transport(sim, "public-page").send(reply_for(target, text=f"other {n}"))
    assert (
        transport(sim, "public-page").lookup(reply.reply_key, reply).provider_reply_id
        == receipt.provider_reply_id
    )


@pytest.mark.parametrize("object", ["instagram", "page"])
def test_lookup_cannot_tell_when_the_match_may_be_another_replys(sim, object):
    """A reply to a reply lands on the top-level thread: same copy, two comments, no way to tell them apart."""
    kind = f"public-{object}"
    top = comment(sim, object)
    nested = comment(sim, object, from_id="user_test_8", parent_id=top)
    nested_reply = reply_for(nested, event="evt_test_0044")
    transport(sim, kind).send(nested_reply)
    for reply in (
        nested_reply,
        reply_for(top),
    ):  # the nested target; the top one, with someone else in the thread
        with pytest.raises(MetaAmbiguous) as caught:
            transport(sim, kind).lookup(reply.reply_key, reply)
        assert caught.value.code == "lookup_reply_not_attributable"


def test_lookup_without_the_reply_cannot_tell(sim):
    with pytest.raises(MetaAmbiguous) as caught:
        transport(sim, "public-instagram").lookup("0" * 64)
    assert caught.value.code == "lookup_needs_reply"


def test_lookup_of_a_deleted_comment_cannot_tell(sim):
    reply = reply_for("179999999999999")
    with pytest.raises(MetaAmbiguous) as caught:
        transport(sim, "public-instagram").lookup(reply.reply_key, reply)
    assert caught.value.code == "lookup_failed_object_gone"


def test_private_lookup_capabilities_are_declared_per_platform(sim):
    """docs/platforms/meta.md#transports: 'declaring their capabilities truthfully (no idempotency key; receipt lookup only where a
    documented read shows the reply, with its limits)'."""
    for kind in ALL:
        caps = transport(sim, kind).capabilities
        assert caps.idempotency_key is False
        assert caps.receipt_lookup is (kind != "private-instagram"), kind
    assert MetaPrivateReplyTransport.capabilities.receipt_lookup is False  # the class answer is conservative
    reply = reply_for(comment(sim, "instagram"))
    with pytest.raises(NotImplementedError):
        transport(sim, "private-instagram").lookup(reply.reply_key, reply)


def test_private_lookup_on_facebook_finds_the_conversation_of_a_reply_the_answer_hid(sim):
    """The simulator serves private_reply_conversation once a private reply was applied, as Meta documents
    the comment field: an answer lost after the apply is then proven sent by the read, nothing resent."""
    target = comment(sim, "page")
    fault(sim, mode="apply_then_drop", count=1)
    reply = reply_for(target, purpose="private_delivery")
    with pytest.raises(MetaAmbiguous):
        transport(sim, "private-page").send(reply)
    assert applied(sim, target)["private"] == {target: 1}
    found = transport(sim, "private-page").lookup(reply.reply_key, reply)
    assert found.evidence == PRIVATE_REPLY_CONVERSATION and found.provider_reply_id.startswith("t_")
    assert applied(sim, target)["private"] == {target: 1}


def test_private_lookup_on_facebook_cannot_tell_when_the_conversation_is_absent(sim):
    """Decided conservatively: no private_reply_conversation (and can_reply_privately still true) is not
    taken as proof that no private reply exists. Meta documents the field for comments that have one, not
    that its absence (Graph omits empty fields) or can_reply_privately is current the moment a send was
    applied; None would authorise a second private message, the harm at-most-once exists to prevent."""
    target = comment(sim, "page")
    reply = reply_for(target, purpose="private_delivery")
    read = receipt_lookup._read(
        transport(sim, "private-page"),
        target,
        {"fields": "id,private_reply_conversation,can_reply_privately"},
    )
    assert "private_reply_conversation" not in read and read["can_reply_privately"] is True
    with pytest.raises(MetaAmbiguous) as caught:
        transport(sim, "private-page").lookup(reply.reply_key, reply)
    assert caught.value.code == "lookup_cannot_tell"


def test_private_lookup_on_facebook_finds_the_conversation(sim, monkeypatch):
    """Meta documents the comment field private_reply_conversation (docs/platforms/meta.md#receipts): the request the
    transport makes and the receipt it builds from Meta's answer shape."""
    from conduit.providers.meta import receipt_lookup as module

    seen = []

    def read(**kwargs):
        seen.append((kwargs["method"], kwargs["path"], kwargs["params"]))
        return graph.GraphResponse(
            {"id": kwargs["path"], "private_reply_conversation": {"id": "t_test_0001"}}, 64
        )

    monkeypatch.setattr(module, "graph_request", read)
    reply = reply_for("100000000000001_000000000000007", purpose="private_delivery")
    found = transport(sim, "private-page").lookup(reply.reply_key, reply)
    assert found == MetaReceipt(
        provider_reply_id="t_test_0001", http_status=200, evidence=PRIVATE_REPLY_CONVERSATION
    )
    assert seen == [("GET", "100000000000001_000000000000007", {"fields": "id,private_reply_conversation"})]


# -- the Messenger echo carries the reply key ---------------------------------------------------


def _echoes(receiver) -> list[dict]:
    out = []
    for raw, _ in receiver.received:
        for entry in json.loads(raw)["entry"]:
            out.extend(m["message"] for m in entry.get("messaging", []) if m["message"].get("is_echo"))
    return out


def test_the_messenger_echo_carries_the_reply_key(notifying_sim, receiver):
    """docs/platforms/meta.md#transports: "Messenger's message.metadata (up to 1,000 characters) is returned in the message echo, which
    makes it a correlation key"."""
    target = comment(notifying_sim, "page")
    reply = reply_for(target, purpose="private_delivery")
    receipt = transport(notifying_sim, "private-page").send(reply)
    deadline = time.monotonic() + 5
    while not _echoes(receiver) and time.monotonic() < deadline:
        time.sleep(0.02)
    [echo] = _echoes(receiver)
    assert echo["metadata"] == reply.reply_key and echo["mid"] == receipt.provider_reply_id


def test_instagram_private_replies_send_no_metadata(notifying_sim, receiver):
    """docs/platforms/meta.md#receipts: 'Instagram support undocumented': the transport does not send it."""
    target = comment(notifying_sim, "instagram")
    reply = reply_for(target, purpose="private_delivery")
    receipt = transport(notifying_sim, "private-instagram").send(reply)
    deadline = time.monotonic() + 5
    while not _echoes(receiver) and time.monotonic() < deadline:
        time.sleep(0.02)
    [echo] = _echoes(receiver)
    assert "metadata" not in echo and echo["mid"] == receipt.provider_reply_id
    assert reply.reply_key.encode() not in b"".join(raw for raw, _ in receiver.received)


# -- live, construction, counting ---------------------------------------------------------------


@pytest.mark.parametrize("cls", [MetaCommentReplyTransport, MetaPrivateReplyTransport])
def test_live_unless_the_graph_url_is_loopback(sim, cls):
    """docs/platforms/meta.md#graph-url: 'live unless the Graph URL is loopback'."""
    assert cls.live is True  # what the registry reads today, knowing no URL
    assert cls.live_for(sim.url) is False and cls.live_for("https://graph.facebook.com/v26.0") is True
    assert cls.live_for("https://127.0.0.1/v26.0") is True  # https is never the simulator
    assert cls(sim.url, object="page").live is False
    assert cls("https://graph.instagram.com/v26.0").live is True


def test_construction_refuses_plain_http_off_this_host_and_decides_the_object():
    with pytest.raises(ValueError):
        MetaCommentReplyTransport("http://graph.facebook.com/v26.0")
    assert MetaCommentReplyTransport("https://graph.instagram.com/v26.0").object == "instagram"
    assert MetaCommentReplyTransport("http://127.0.0.1:9/instagram/v26.0").object == "instagram"
    assert MetaCommentReplyTransport("https://graph.facebook.com/v26.0").object == "page"
    assert (
        MetaCommentReplyTransport("https://graph.facebook.com/v26.0", object="instagram").object
        == "instagram"
    )
    assert TOKEN not in repr(MetaCommentReplyTransport("https://graph.facebook.com/v26.0", token=TOKEN))


def test_sends_and_lookups_are_counted_by_transport_name(sim):
    CALLS.clear()
    target = comment(sim, "page")
    reply = reply_for(target)
    public = transport(sim, "public-page")
    public.send(reply)
    public.lookup(reply.reply_key, reply)
    transport(sim, "private-page").send(reply_for(target, purpose="private_delivery"))
    assert CALLS == {
        ("meta-comment-reply", "build"): 1,
        ("meta-comment-reply", "send"): 1,
        ("meta-comment-reply", "lookup"): 1,
        ("meta-private-reply", "build"): 1,
        ("meta-private-reply", "send"): 1,
    }


# -- the loopback guard, and positive controls ---------------------------------------------------


def test_the_loopback_guard_catches_a_send_to_meta(monkeypatch):
    """docs/testing.md#folders: 'a test fails if anything attempts a non-loopback address'. Positive control: a transport
    pointed at Meta's host is caught by the guard (refused before DNS) and the check names it."""
    attempted: list[str] = []
    monkeypatch.setattr(socket, "create_connection", loopback_guard(attempted))
    live = MetaPrivateReplyTransport(
        "https://graph.facebook.com/v26.0", token=TOKEN, account_ref=PAGE, object="page"
    )
    with pytest.raises(MetaNotSent) as caught:
        live.send(reply_for("100000000000001_000000000000007"))
    assert caught.value.code == "connect_failed" and not caught.value.reached
    assert outside_hosts(attempted) == ["graph.facebook.com"]  # the autouse check would fail on this list


@pytest.mark.parametrize(
    "row,broken",
    [
        ((190, None), errors.UNKNOWN),
        ((4, None), errors.UNKNOWN),
        ((10900, None), errors.UNKNOWN),
        ((10, 2534022), errors.UNKNOWN),
    ],
)
def test_positive_control_a_broken_table_fails_the_outcome_check(sim, monkeypatch, row, broken):
    """Break the table (map 190, a throttling code, 10900 or the window to 'ambiguous'): the same check the
    outcome tests use must fail."""
    code, subcode = row
    expected = next(f for f in FAULTS if (f[0], f[1]) == row)
    monkeypatch.setitem(errors._BY_CODE, row, errors.Row(code, subcode, None, broken))
    # The already-replied text names 10900 too: the broken table has no pattern either.
    monkeypatch.setattr(errors, "_PATTERNS", [])
    with pytest.raises(AssertionError):
        check_error_outcome(sim, "private-page", *expected)


# -- usage near the limit on a success ---------------------------------------------------------


@pytest.mark.parametrize(
    "usage, expected",
    [
        (
            {
                "1": [
                    {
                        "type": "instagram",
                        "call_count": 95,
                        "total_cputime": 1,
                        "total_time": 1,
                        "estimated_time_to_regain_access": 3,
                    }
                ]
            },
            180.0,
        ),
        (
            {
                "1": [
                    {
                        "type": "pages",
                        "call_count": 1,
                        "total_cputime": 90,
                        "total_time": 1,
                        "estimated_time_to_regain_access": 0,
                    }
                ]
            },
            graph.USAGE_DEFAULT_PAUSE_SECONDS,
        ),
        (
            {
                "1": [
                    {
                        "type": "pages",
                        "call_count": 89,
                        "total_cputime": 89,
                        "total_time": 89,
                        "estimated_time_to_regain_access": 5,
                    }
                ]
            },
            None,
        ),
    ],
)
def test_usage_near_the_limit_is_a_pause(usage, expected):
    assert graph.usage_pause_seconds(json.dumps(usage)) == expected


def test_a_receipt_carries_the_pause_a_near_limit_usage_header_announced(sim):
    target = comment(sim, "instagram")
    fault(sim, mode="usage", call_count=92, retry_minutes=1, method="POST")
    receipt = transport(sim, "public-instagram").send(reply_for(target))
    assert receipt.evidence == REPLY_CREATED and receipt.retry_after == 60.0
    assert transport(sim, "public-instagram").send(reply_for(comment(sim, "instagram"))).retry_after is None
