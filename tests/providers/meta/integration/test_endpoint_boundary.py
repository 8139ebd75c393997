"""The Meta endpoint's input boundary: one regression test per hole an independent audit found.

Every authentic body ends accepted, duplicate, or with one receipt, whatever its leaves: no 500 for
an out-of-range time, a list where a word goes or a lone surrogate in a name (1); a NUL in a name
that is only counted is escaped and counted, never refused (2); two bodies carrying the same echoes
in opposite orders never deadlock (3); a refused body posted many times at once meets its first
receipt (4); a body Meta may send is not refused as too large (5); the account's own items keep the
digest of their text (6).
"""

from __future__ import annotations

import http.client
import json
import threading
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from conduit.providers.base import reply_text_digest
from conduit.providers.meta import webhook
from conduit.providers.meta.webhook import MAX_UPDATES_PER_BODY, signature_header
from ingress.models import IgnoredUpdate, InboundEvent, QuarantineReceipt, SelfAuthoredItem
from tests.providers.meta.integration.conftest import APP_ID, APP_SECRET, IG_ACCOUNT, PAGE_ACCOUNT, meta_body
from tests.replies.test_route_migration import _migrate

URL = f"/webhooks/meta/{APP_ID}/"
PERSON = "17841400000000901"
PAGE_PERSON = "200000000000901"


# -- bodies ---------------------------------------------------------------------------------------


def encoded(document) -> bytes:
    # ensure_ascii: a lone surrogate goes out as the escape "\ud800", as strict JSON reads it back.
    return json.dumps(document).encode("ascii")


def ig_change(n: int = 1, **value) -> dict:
    return {
        "field": "comments",
        "value": {
            "id": f"179000000000{n:05d}",
            "text": "What is the price?",
            "from": {"id": PERSON},
            "media": {"id": "17800000000000001"},
            **value,
        },
    }


def ig_body(*changes, account: str = IG_ACCOUNT, time=1767225600, object_="instagram", **entry) -> bytes:
    return encoded(
        {
            "object": object_,
            "entry": [{"id": account, "time": time, "changes": list(changes or [ig_change()]), **entry}],
        }
    )


def page_change(n: int = 1, **value) -> dict:
    return {
        "field": "feed",
        "value": {
            "item": "comment",
            "verb": "add",
            "comment_id": f"300000000000001_4000000000{n:05d}",
            "post_id": "100000000000001_300000000000001",
            "from": {"id": PAGE_PERSON, "name": "Test Buyer"},
            "created_time": 1767225600,
            "message": "What is the price?",
            **value,
        },
    }


def page_body(*changes, time=1767225600) -> bytes:
    return encoded(
        {
            "object": "page",
            "entry": [{"id": PAGE_ACCOUNT, "time": time, "changes": list(changes or [page_change()])}],
        }
    )


def echo(mid: str, *, text: str = "Details sent.", timestamp=1767225602000, **message) -> dict:
    return {
        "sender": {"id": PAGE_ACCOUNT},
        "recipient": {"id": PAGE_PERSON},
        "timestamp": timestamp,
        "message": {"mid": mid, "text": text, "is_echo": True, **message},
    }


def message(mid: str = "m_test_page_0001", *, timestamp=1767225602000) -> dict:
    return {
        "sender": {"id": PAGE_PERSON},
        "recipient": {"id": PAGE_ACCOUNT},
        "timestamp": timestamp,
        "message": {"mid": mid, "text": "What is the price?"},
    }


def messaging_body(*events) -> bytes:
    return encoded(
        {"object": "page", "entry": [{"id": PAGE_ACCOUNT, "time": 1767225602000, "messaging": list(events)}]}
    )


def assert_answered(response) -> dict:
    """Authentic: 200, and every member not accepted names an authenticated receipt that exists."""
    assert response.status_code == 200, (response.status_code, response.content[:300])
    answer = response.json()
    for result in answer["results"]:
        if result["result"] in ("accepted", "duplicate"):
            assert InboundEvent.objects.filter(event_key=result["event_key"]).exists()
        else:
            assert QuarantineReceipt.objects.get(receipt_id=result["receipt_id"]).authenticated
    return answer


# -- 1. no 500 for an authentic body, whatever its leaves -------------------------------------------

HOLES = {
    # `changes` that is not a list.
    "changes_a_number": lambda: ig_body(changes=5),
    "changes_true": lambda: ig_body(changes=True),
    # A list (unhashable) where the Page's verb goes.
    "verb_a_list": lambda: page_body(page_change(verb=["add"])),
    "verb_an_object": lambda: page_body(page_change(verb={"add": 1})),
    # Times past the calendar (fromtimestamp: OSError, OverflowError or ValueError).
    "entry_time_10e20": lambda: ig_body(time=10**20),
    "entry_time_minus_2e63": lambda: ig_body(time=-(2**63)),
    "page_entry_time_10e20": lambda: page_body(page_change(created_time=None), time=10**20),
    "created_time_10e20": lambda: page_body(page_change(created_time=10**20)),
    "created_time_minus_2e63": lambda: page_body(page_change(created_time=-(2**63))),
    "ig_timestamp_10e20": lambda: ig_body(ig_change(timestamp=10**20)),
    "ig_timestamp_minus_2e63": lambda: ig_body(ig_change(timestamp=-(2**63))),
    "message_timestamp_10e20": lambda: messaging_body(message(timestamp=10**20)),
    "message_timestamp_minus_2e63": lambda: messaging_body(message(timestamp=-(2**63))),
    "echo_timestamp_minus_2e63": lambda: messaging_body(echo("m_test_echo_t", timestamp=-(2**63))),
    "iso_time_past_the_calendar": lambda: page_body(page_change(created_time="0001-01-01T00:00:00+01:00")),
    # Lone surrogates in what is only counted or kept as evidence.
    "surrogate_field_name": lambda: ig_body({"field": "comm\ud800ents", "value": {}}),
    "surrogate_object_name": lambda: ig_body(object_="us\ud800er"),
    "surrogate_feed_item": lambda: page_body({"field": "feed", "value": {"item": "st\ud800atus"}}),
    "surrogate_feed_verb": lambda: page_body(page_change(verb="ad\udfffd")),
    "surrogate_echo_metadata": lambda: messaging_body(echo("m_test_echo_s", metadata="rk_\ud800")),
    "surrogate_echo_text": lambda: messaging_body(echo("m_test_echo_x", text="Details \ud800 sent.")),
}


@pytest.mark.parametrize("hole", HOLES)
def test_an_authentic_body_with_a_hostile_leaf_is_answered_200_never_500(
    client, meta_sources, post_meta, hole
):
    client.raise_request_exception = False
    body = HOLES[hole]()
    answer = assert_answered(post_meta(body))
    receipts = QuarantineReceipt.objects.count()
    counted = sum(IgnoredUpdate.objects.values_list("count", flat=True))
    assert answer["results"] or answer.get("ignored") or SelfAuthoredItem.objects.exists(), answer
    # A retry of the same bytes meets what the first wrote.
    assert_answered(post_meta(body))
    assert QuarantineReceipt.objects.count() == receipts
    if counted:
        assert sum(IgnoredUpdate.objects.values_list("count", flat=True)) == 2 * counted


@pytest.mark.parametrize("value", [10**20, -(2**63), 2**63, 10**17])
def test_an_entry_time_past_the_calendar_is_an_invalid_time_receipt(post_meta, meta_sources, value):
    """An Instagram comment carries no time of its own: with an entry time no calendar holds,
    the comment is refused for its time (one receipt), not for a crash."""
    answer = assert_answered(post_meta(ig_body(time=value)))
    assert [r["reason_code"] for r in answer["results"]] == ["invalid_occurred_at"]
    assert QuarantineReceipt.objects.get().reason_code == "invalid_occurred_at"


def test_changes_that_are_not_a_list_refuse_the_body_once(post_meta, meta_sources):
    answer = assert_answered(post_meta(ig_body(changes=5)))
    assert [(r["index"], r["reason_code"]) for r in answer["results"]] == [(None, "invalid_body")]


# -- 2. names that are only counted are escaped, never refused ------------------------------------

NAMED = {
    "field": (lambda name: ig_body({"field": name, "value": {}}), "instagram."),
    "object": (lambda name: ig_body(object_=name), "object."),
    "feed_item": (lambda name: page_body({"field": "feed", "value": {"item": name}}), "page.feed."),
    "feed_verb": (lambda name: page_body(page_change(verb=name)), "page.feed.comment."),
    "page_field": (
        lambda name: encoded(
            {
                "object": "page",
                "entry": [
                    {"id": PAGE_ACCOUNT, "time": 1767225600, "changes": [{"field": name, "value": {}}]}
                ],
            }
        ),
        "page.",
    ),
}


@pytest.mark.parametrize("where", NAMED)
@pytest.mark.parametrize("name", ["ra\x00ting", "\x00", "\x1b[31m\x7f", "r\ud800\x00" * 40])
def test_an_unprintable_name_is_counted_escaped_and_never_refused(post_meta, meta_sources, where, name):
    build, prefix = NAMED[where]
    body = build(name)
    for sighting in (1, 2):
        answer = assert_answered(post_meta(body))
        assert answer["results"] == [] and answer["ignored"] == 1
        assert not QuarantineReceipt.objects.exists()
        (counted,) = IgnoredUpdate.objects.all()
        assert counted.count == sighting
    assert counted.name.startswith(prefix) and len(counted.name) <= 64
    assert counted.name.isprintable() and "\x00" not in counted.name
    counted.name.encode("utf-8")  # no lone surrogate either


def test_escaped_names_stay_apart_and_printable_ones_are_kept_as_sent(post_meta, meta_sources):
    assert_answered(
        post_meta(
            ig_body(
                {"field": "a\x00", "value": {}},
                {"field": "a\x01", "value": {}},
                {"field": "ratings", "value": {}},
            )
        )
    )
    assert sorted(IgnoredUpdate.objects.values_list("name", flat=True)) == [
        "instagram.a\\x00",
        "instagram.a\\x01",
        "instagram.ratings",
    ]


# -- 3. the same echoes in opposite orders, at once -----------------------------------------------


def post_at_once(base_url: str, bodies: list[bytes]) -> list[tuple[int, bytes]]:
    """POST each body on its own connection, all released at once; (status, body) in body order."""
    parts = urlsplit(base_url)
    barrier = threading.Barrier(len(bodies))
    answers: list[tuple[int, bytes] | None] = [None] * len(bodies)

    def run(position: int, body: bytes) -> None:
        headers = {
            "X-Hub-Signature-256": signature_header(body=body, secret=APP_SECRET),
            "Content-Type": "application/json",
        }
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            barrier.wait()
            conn.request("POST", URL, body=body, headers=headers)
            response = conn.getresponse()
            answers[position] = (response.status, response.read())
        finally:
            conn.close()

    threads = [threading.Thread(target=run, args=(n, b)) for n, b in enumerate(bodies)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(answer is not None for answer in answers)
    return answers  # type: ignore[return-value]


ROUNDS = 60


@pytest.mark.django_db(transaction=True)
def test_two_bodies_with_the_same_two_echoes_in_opposite_orders_never_deadlock(live_server, meta_sources):
    """Each round two bodies carry the same two new echoes, one in each order, posted at once; then
    the same two bodies again (the rows now exist: the repeat path). Written in body order, each
    transaction held one echo's row and waited for the other's: PostgreSQL broke the deadlock by
    failing one, answered 503 store_unavailable while the store was up."""
    for round_ in range(ROUNDS):
        echoes = [echo(f"m_test_dl_{round_:02d}_a", metadata="rk_a"), echo(f"m_test_dl_{round_:02d}_b")]
        bodies = [messaging_body(*echoes), messaging_body(*reversed(echoes))]
        for attempt in ("new", "again"):
            answers = post_at_once(live_server.url, bodies)
            assert [status for status, _ in answers] == [200, 200], (round_, attempt, answers)
    assert SelfAuthoredItem.objects.count() == 2 * ROUNDS
    assert set(SelfAuthoredItem.objects.values_list("seen_count", flat=True)) == {4}


# -- 4. a refused body posted many times at once --------------------------------------------------

WORKERS = 16
RUSHES = 4
REFUSED = {
    # body_split refuses the whole body: an entry that is not an object.
    "whole_body": lambda n: encoded({"object": "instagram", "entry": [n]}),
    # an entry no source of the app owns.
    "unknown_account": lambda n: ig_body(account="17841400000000999", time=1767225600 + n),
    # a member refused by ingest (the source's share: the all-or-nothing body of docs/concepts/event-contract.md#batches).
    "member": lambda n: ig_body(
        ig_change(1), ig_change(2, **{"from": {"username": "no_id"}}), time=1767225600 + n
    ),
}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("kind", REFUSED)
def test_a_refused_body_posted_at_once_meets_one_receipt(live_server, meta_sources, kind):
    """Each rush posts 16 copies of one refused body at once (a read before the insert let several
    copies find no receipt and each write one); every copy and a later retry name one receipt."""
    for rush in range(RUSHES):
        body = REFUSED[kind](rush)
        answers = post_at_once(live_server.url, [body] * WORKERS)
        assert [status for status, _ in answers] == [200] * WORKERS, answers
        (receipt,) = QuarantineReceipt.objects.filter(delivery_id=json.loads(answers[0][1])["delivery_id"])
        assert receipt.authenticated
        assert {json.loads(content)["receipt_ids"][0] for _, content in answers} == {str(receipt.receipt_id)}
        # And a retry after the rush meets it too.
        assert post_at_once(live_server.url, [body])[0][0] == 200
    assert QuarantineReceipt.objects.count() == RUSHES


def test_the_database_holds_one_waiting_receipt_per_finding(meta_sources):
    """The invariant is the database's, not a prior read's: a second waiting receipt of one body,
    reason and member of a delivery identified by its body cannot be written, whoever writes it."""
    from django.db import IntegrityError, transaction

    values = dict(
        source=meta_sources["instagram"],
        reason_code="invalid_body",
        authenticated=True,
        received_at=timezone.now(),
        delivery_id="sha256:" + "0" * 64,
        body_sha256="0" * 64,
        body_bytes=10,
        event_index=None,
    )
    QuarantineReceipt.objects.create(**values)
    with pytest.raises(IntegrityError), transaction.atomic():
        QuarantineReceipt.objects.create(**values)
    # Another member, another reason, an unauthenticated copy: each its own receipt.
    QuarantineReceipt.objects.create(**{**values, "event_index": 0})
    QuarantineReceipt.objects.create(**{**values, "reason_code": "missing_identity"})
    QuarantineReceipt.objects.create(**{**values, "authenticated": False, "delivery_id": ""})
    QuarantineReceipt.objects.create(**{**values, "authenticated": False, "delivery_id": ""})
    # A provider's own delivery id is left to its writer's read (ingress.services).
    QuarantineReceipt.objects.create(**{**values, "delivery_id": "msg_test_own_id"})
    QuarantineReceipt.objects.create(**{**values, "delivery_id": "msg_test_own_id"})


@pytest.mark.django_db(transaction=True)
def test_the_migration_dismisses_the_copies_a_race_left_and_keeps_the_first_waiting():
    """Receipts written twice before the constraint: the first stays waiting; each later copy
    still waiting is dismissed as a copy of it, with its transition recorded; a copy a person
    already reviewed, receipts of other findings, and those outside the constraint (forged
    bodies, a provider's own delivery ids) are left as they are."""
    leaves = MigrationExecutor(connection).loader.graph.leaf_nodes()
    try:
        old = _migrate([("ingress", "0011_event_history_checked_per_statement")])
        Source = old.get_model("ingress", "Source")
        Receipt = old.get_model("ingress", "QuarantineReceipt")
        source = Source.objects.create(
            name="ig-m",
            adapter="meta-instagram",
            source_system="meta-instagram",
            account_ref="1784",
            event_types=["comment.created"],
            secret_env="X",
        )
        now = timezone.now()
        finding = dict(
            source=source,
            reason_code="invalid_body",
            authenticated=True,
            received_at=now,
            delivery_id="sha256:" + "1" * 64,
            body_sha256="1" * 64,
            body_bytes=9,
            event_index=None,
        )
        first, second, third = (Receipt.objects.create(**finding) for _ in range(3))
        reviewed = Receipt.objects.create(**finding, state="DISMISSED", reviewed_by="owner_test")
        member = Receipt.objects.create(**{**finding, "event_index": 2})
        forged = [
            Receipt.objects.create(**{**finding, "authenticated": False, "delivery_id": ""}) for _ in range(2)
        ]
        own_id = [Receipt.objects.create(**{**finding, "delivery_id": "msg_test_own_id"}) for _ in range(2)]

        new = _migrate(leaves)
        Receipt = new.get_model("ingress", "QuarantineReceipt")
        states = dict(Receipt.objects.values_list("pk", "state"))
        assert states[first.pk] == states[member.pk] == "QUARANTINED"
        assert states[second.pk] == states[third.pk] == "DISMISSED"
        assert states[reviewed.pk] == "DISMISSED"
        assert all(states[r.pk] == "QUARANTINED" for r in forged + own_id)
        copy = Receipt.objects.get(pk=second.pk)
        assert str(first.receipt_id) in copy.review_note and copy.reviewed_at is not None
        history = new.get_model("ingress", "QuarantineTransition").objects.get(receipt_id=second.pk)
        assert (history.prior_state, history.next_state, history.reason_code) == (
            "QUARANTINED",
            "DISMISSED",
            "duplicate_receipt",
        )
        assert Receipt.objects.get(pk=reviewed.pk).reviewed_by == "owner_test"
    finally:
        _migrate(leaves)


# -- 5. a body Meta may send is not too large -----------------------------------------------------


def test_a_thousand_instagram_comments_of_2200_characters_are_accepted(post_meta, meta_sources):
    """Meta's bounds: up to 1,000 updates a POST, an Instagram comment up to 2,200 characters
    (about 2.3 MiB of body, past the 1 MiB the sandbox's endpoint takes)."""
    body = ig_body(*(ig_change(n, text="p" * 2200) for n in range(MAX_UPDATES_PER_BODY)))
    assert len(body) > 2 * 1024 * 1024
    answer = assert_answered(post_meta(body))
    assert len(answer["results"]) == MAX_UPDATES_PER_BODY
    assert {r["result"] for r in answer["results"]} == {"accepted"}


def test_the_limit_is_derived_from_metas_bounds_and_holds_the_largest_body_meta_may_send():
    assert django_settings.CONDUIT_META_WEBHOOK_MAX_BYTES == webhook.MAX_BODY_BYTES
    # The largest update: a Facebook comment of 8,000 characters, each sent as a \uXXXX escape.
    update = json.dumps(
        page_change(99999, message="\u00e9" * 8000, **{"from": {"id": PAGE_PERSON, "name": "\u00e9" * 100}}),
        ensure_ascii=True,
    )
    envelope = len(page_body(page_change())) - len(json.dumps(page_change()))
    largest = envelope + MAX_UPDATES_PER_BODY * (len(update) + 2)
    assert largest <= webhook.MAX_BODY_BYTES
    # The sandbox's endpoint keeps its own limit.
    assert django_settings.CONDUIT_WEBHOOK_MAX_BYTES == 1024 * 1024


def test_an_operator_override_of_the_meta_limit_holds(post_meta, meta_sources, settings):
    body = meta_body("meta_instagram/comment__created")
    settings.CONDUIT_META_WEBHOOK_MAX_BYTES = len(body) - 1
    response = post_meta(body)
    assert (response.status_code, response.json()["code"]) == (413, "payload_too_large")
    settings.CONDUIT_META_WEBHOOK_MAX_BYTES = len(body)
    assert post_meta(body).status_code == 200


# -- 6. own items keep the digest of their text ---------------------------------------------------

OWN = {
    "instagram_comment": ("meta_instagram/comment__self_authored", "Thanks, details sent."),
    "page_comment": ("meta_page/comment__self_authored", "Thanks, sent you the details."),
    "instagram_echo": ("meta_instagram/message__echo", "Details sent."),
    "page_echo": ("meta_page/message__echo_metadata", "Details sent."),
}


@pytest.mark.parametrize("own", OWN)
def test_an_own_item_keeps_its_text_digest_and_the_signal_carries_it(
    post_meta, meta_sources, django_capture_on_commit_callbacks, own
):
    from ingress.signals import self_authored_seen

    fixture, text = OWN[own]
    heard: list[dict] = []

    def listen(sender, *, source_id, items, **kwargs):
        heard.extend(items)

    self_authored_seen.connect(listen, dispatch_uid="test-own-digest")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            assert_answered(post_meta(meta_body(fixture)))
        first = SelfAuthoredItem.objects.get()
        assert first.text_digest == reply_text_digest(text) != ""
        assert [item["text_digest"] for item in heard] == [first.text_digest]
        # A repeat whose text reads otherwise keeps the digest first seen.
        changed = meta_body(fixture).replace(text.encode(), b"Something else entirely.")
        heard.clear()
        with django_capture_on_commit_callbacks(execute=True):
            assert_answered(post_meta(changed))
        again = SelfAuthoredItem.objects.get()
        assert again.seen_count == 2 and again.text_digest == first.text_digest
        assert [item["text_digest"] for item in heard] == [first.text_digest]
    finally:
        self_authored_seen.disconnect(dispatch_uid="test-own-digest")


def test_the_adapter_gives_each_own_item_its_digest():
    from conduit.providers.base import SourceConfig
    from conduit.providers.registry import get_adapter

    for own, (fixture, text) in OWN.items():
        adapter = get_adapter(fixture.split("/")[0].replace("_", "-"))
        account = IG_ACCOUNT if adapter.object == "instagram" else PAGE_ACCOUNT
        config = SourceConfig(
            name="t",
            source_system=adapter.source_system,
            account_ref=account,
            event_types=frozenset({"comment.created", "message.created"}),
            contract_version="meta-v1",
            canary=False,
        )
        (item,) = adapter.parse(body=meta_body(fixture), config=config).own
        assert item.text_digest == reply_text_digest(text), own
