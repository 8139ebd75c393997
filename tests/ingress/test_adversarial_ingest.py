"""Adversarial pass over ingest's one statement (ingress.writes), the per-process source cache and
prepared statements (docs/internals.md#prepared): real threads and connections on PostgreSQL, no mocks of the store."""

from __future__ import annotations

import http.client
import importlib
import json
import threading
from urllib.parse import urlsplit

import psycopg
import pytest
from django.db import connection

from conduit.sql import JsonRows
from ingress import selectors
from ingress.models import Delivery, EventState, InboundEvent, QuarantineReceipt, Source
from ingress.services import source_update
from replies.models import ReplyAction
from tests.conftest import sign
from tests.reconcile.conftest import body, item

REFUSE = importlib.import_module("ingress.migrations.0009_conduit_refuse")


@pytest.fixture(autouse=True)
def _no_source_cached_by_an_earlier_test():
    selectors._READ.clear()
    yield
    selectors._READ.clear()


def _admin():
    s = connection.settings_dict
    return psycopg.connect(host=s["HOST"], port=s["PORT"], user=s["USER"], dbname=s["NAME"], autocommit=True)


def _post(base_url: str, raw: bytes, headers: dict, path: str = "/webhooks/sandbox/") -> tuple[int, dict]:
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=90)
    try:
        conn.request("POST", path, body=raw, headers={**headers, "Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


# -- concurrency: refusals and accepts sharing keys, in different orders -----------------------

OTHER = "CHECKLIST, said otherwise"  # item 2 with this text: the same key, another payload


@pytest.mark.django_db(transaction=True)
def test_concurrent_accepts_and_refusals_sharing_keys_in_every_order_never_deadlock_or_half_write(
    live_server, sandbox_source
):
    """24 bodies at once over HTTP: overlapping keys in opposite orders, some carrying event 2 with
    another payload (whichever payload lands first holds the key; the others' bodies are refused
    whole), some the same delivery twice. docs/concepts/event-contract.md#batches: "Any invalid member rolls back the entire
    batch, including canonical identity ownership"."""
    shapes = [
        [item(1), item(2), item(3), item(4)],
        [item(4), item(3), item(2), item(1)],
        [item(3), item(1)],
        [item(2), item(4)],
        [item(4), item(2, text=OTHER), item(5)],
        [item(5), item(1), item(2, text=OTHER)],
        [item(2, text=OTHER)],
        [item(6), item(5), item(4)],
    ]
    sends = []  # (shape index, delivery id)
    for n, _ in enumerate(shapes):
        sends += [(n, f"msg_test_adv_{n}_a"), (n, f"msg_test_adv_{n}_a"), (n, f"msg_test_adv_{n}_b")]
    signed = [(n, body(*shapes[n]), d) for n, d in sends]
    signed = [(n, raw, sign(raw, delivery_id=d)) for n, raw, d in signed]
    barrier = threading.Barrier(len(signed))
    answers: list = [None] * len(signed)

    def run(i: int) -> None:
        _, raw, headers = signed[i]
        barrier.wait()
        answers[i] = _post(live_server.url, raw, headers)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(signed))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    statuses = [a[0] for a in answers]
    assert set(statuses) <= {200, 202}, statuses  # a deadlock would be a 503, a bug a 500

    stored = {e.source_event_id: e for e in InboundEvent.objects.all()}
    two_is_other = stored["evt_test_000002"].message_text == OTHER
    accepted_shapes = []
    for (n, _, _), (status, payload) in zip(signed, answers):
        carries_other = any(i.get("text") == OTHER for i in shapes[n])
        carries_two = any(i["id"] == "evt_test_000002" for i in shapes[n])
        conflicts = carries_two and (carries_other != two_is_other)
        if conflicts:
            assert status == 202 and all(
                r["result"] in ("quarantined", "rolled_back") for r in payload["results"]
            )
        else:
            assert status == 200, payload
            accepted_shapes.append(n)
    # Every key seen once per accepted body, and a refused body left no trace in the counts.
    expected = {}
    for n in accepted_shapes:
        for i in shapes[n]:
            expected[i["id"]] = expected.get(i["id"], 0) + 1
    assert {k: e.seen_count for k, e in stored.items()} == expected
    assert sorted(Delivery.objects.values_list("delivery_id", "seen_count")) == sorted(
        (f"msg_test_adv_{n}_{x}", 2 if x == "a" else 1) for n in set(accepted_shapes) for x in "ab"
    )
    ready = InboundEvent.objects.filter(event_state=EventState.RECORD_READY).count()
    assert ReplyAction.objects.count() == 2 * ready
    refused = len(signed) - len(accepted_shapes)
    # One receipt per refused body's delivery (a redelivery of the same bytes meets the first).
    assert refused > 0 and 0 < QuarantineReceipt.objects.count() <= refused


# -- the fallback path (a body one JSON parameter cannot carry) under a cached source -------------


@pytest.mark.django_db(transaction=True)
def test_a_body_taking_the_statement_by_statement_path_is_never_decided_on_a_changed_cached_source(
    sandbox_source, deliver, monkeypatch
):
    """ingress.selectors: "a cached source is never acted on once changed". A body with a value
    that has no exact JSON form takes _events_write (body_write returns None): it must be decided
    under the trigger rule in force, not the one this process cached."""
    assert deliver(body(item(1))).status_code == 200  # caches the source
    source_update(source_id=sandbox_source.pk, changes={"trigger_keywords": ["SOMETHING ELSE"]})
    monkeypatch.setattr(JsonRows, "encoded", lambda self, rows: None)  # no exact JSON form
    assert deliver(body(item(2))).status_code == 200
    second = InboundEvent.objects.get(source_event_id="evt_test_000002")
    assert (second.event_state, second.trigger_rule_version) == (EventState.CLOSED_NO_REPLY, 2)
    assert ReplyAction.objects.count() == 2  # event 1's only


@pytest.mark.django_db(transaction=True)
def test_a_body_taking_the_statement_by_statement_path_after_its_cached_source_was_replaced_is_not_a_500(
    sandbox_source, deliver, monkeypatch
):
    """The cached source was deleted and a source registered again under its name: the fallback
    writes with the dead source's id (an IntegrityError, answered 500) instead of reading afresh."""
    from replies.models import ReplyRoute
    from tests.conftest import SECRET_ENV

    assert selectors.source_by_name("sandbox") is not None  # this process holds it now
    ReplyRoute.objects.filter(source=sandbox_source).delete()
    Source.objects.filter(pk=sandbox_source.pk).delete()
    from ingress.services import source_register

    source_register(
        name="sandbox",
        adapter="sandbox-social",
        account_ref="acct_test_01",
        event_types=["comment.created"],
        purposes=["public_ack"],
        trigger_keywords=["CHECKLIST"],
        secret_env=SECRET_ENV,
    )
    monkeypatch.setattr(JsonRows, "encoded", lambda self, rows: None)  # no exact JSON form
    response = deliver(body(item(1)))
    assert response.status_code == 200
    assert InboundEvent.objects.get().source.name == "sandbox"


# -- the source changing under the cache ------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_source_renamed_while_cached_is_unknown_by_its_old_name_and_writes_nothing(sandbox_source, deliver):
    assert deliver(body(item(1))).status_code == 200  # caches "sandbox"
    source_update(source_id=sandbox_source.pk, changes={"name": "sandbox-renamed"})
    response = deliver(body(item(2)))
    assert (response.status_code, response.json()["code"]) == (404, "unknown_source")
    assert not InboundEvent.objects.filter(source_event_id="evt_test_000002").exists()
    assert deliver(body(item(2)), source="sandbox-renamed").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_source_deleted_while_cached_is_unknown_and_writes_nothing(sandbox_source, deliver):
    assert selectors.source_by_name("sandbox") is not None  # this process holds it now
    from replies.models import ReplyRoute

    ReplyRoute.objects.filter(source=sandbox_source).delete()
    Source.objects.filter(pk=sandbox_source.pk).delete()
    response = deliver(body(item(1)))
    assert (response.status_code, response.json()["code"]) == (404, "unknown_source")
    assert (Delivery.objects.count(), InboundEvent.objects.count(), QuarantineReceipt.objects.count()) == (
        0,
        0,
        0,
    )


@pytest.mark.django_db(transaction=True)
def test_a_source_that_changes_on_every_read_is_decided_once_on_the_second_read_never_looping(
    sandbox_source, deliver, monkeypatch
):
    """The row changes again between the SourceChanged retry's read and its write: the retry, with
    a source read afresh, is not checked again; one answer, no loop, no 500."""
    assert deliver(body(item(1))).status_code == 200
    real = selectors.source_by_name
    reads = []

    def moving(name, *, cached=False):
        reads.append(cached)
        found = real(name, cached=cached)
        Source.objects.filter(pk=sandbox_source.pk).update(retention_days=30 + len(reads))
        return found

    from ingress import views

    monkeypatch.setattr(views, "source_by_name", moving)
    assert deliver(body(item(2))).status_code == 200
    assert reads == [True, False]
    assert InboundEvent.objects.get(source_event_id="evt_test_000002").seen_count == 1


@pytest.mark.django_db(transaction=True)
def test_a_redelivery_retried_after_a_stale_source_counts_its_delivery_once(sandbox_source, deliver):
    """The stale attempt wrote nothing: the delivery and its events are seen twice, not three times."""
    raw = body(item(1), item(2))
    assert deliver(raw, delivery_id="msg_test_twice").status_code == 200
    source_update(source_id=sandbox_source.pk, changes={"retention_days": 31})
    answer = deliver(raw, delivery_id="msg_test_twice")
    assert [r["result"] for r in answer.json()["results"]] == ["duplicate", "duplicate"]
    assert Delivery.objects.get().seen_count == 2
    assert set(InboundEvent.objects.values_list("seen_count", flat=True)) == {2}


@pytest.mark.django_db(transaction=True)
def test_a_refusal_under_a_stale_cached_source_is_recorded_once(sandbox_source, deliver):
    assert deliver(body(item(1))).status_code == 200
    source_update(source_id=sandbox_source.pk, changes={"retention_days": 31})
    response = deliver(body(item(1, text="CHECKLIST edited"), item(3)))
    assert response.status_code == 202
    assert [r["result"] for r in response.json()["results"]] == ["quarantined", "rolled_back"]
    assert (
        QuarantineReceipt.objects.count() == 1
        and not InboundEvent.objects.filter(source_event_id="evt_test_000003").exists()
    )
    assert deliver(body(item(4))).status_code == 200  # the connection serves the next request


# -- conduit_refuse missing (a dump restored without functions) --------------------------------


@pytest.mark.django_db(transaction=True)
def test_without_conduit_refuse_every_body_is_503_never_a_silent_acceptance(sandbox_source, deliver):
    """The function dropped (a dump restored without functions) while this connection holds the
    one statement prepared: every body, refused or not, is a retryable 503 and nothing is written;
    with the function back, the same connection refuses and accepts again."""
    for n in range(1, 7):  # the one statement is prepared on this connection now
        assert deliver(body(item(n)), delivery_id=f"msg_test_prep_{n}").status_code == 200
    with _admin() as admin:
        admin.execute(REFUSE.DROP)
    try:
        for raw in (body(item(1, text="CHECKLIST edited")), body(item(7)), body(item(1))):
            response = deliver(raw)
            assert (response.status_code, response.json()["code"]) == (503, "store_unavailable")
        assert (
            InboundEvent.objects.count(),
            Delivery.objects.count(),
            QuarantineReceipt.objects.count(),
        ) == (6, 6, 0)
        assert InboundEvent.objects.get(source_event_id="evt_test_000001").seen_count == 1
    finally:
        with _admin() as admin:
            admin.execute(REFUSE.CREATE)
    response = deliver(body(item(1, text="CHECKLIST edited")))
    assert response.status_code == 202
    assert deliver(body(item(7))).status_code == 200


# -- Meta: a refused share inside the app body's one transaction (a savepoint) -------------------

META_ENV = {
    "CONDUIT_SOURCE_TEST_META_SECRET": "0123456789abcdef0123456789abcdef",
    "CONDUIT_SOURCE_TEST_META_VERIFY": "verify-token-test-only-01",
    "CONDUIT_SOURCE_TEST_META_TOKEN": "graph-token-test-only",
}
IG_OTHER = "17841400000000002"


def _meta_comment(account: str, comment_id: str, text: str) -> dict:
    return {
        "id": account,
        "time": 1767225600,
        "changes": [
            {
                "field": "comments",
                "value": {
                    "id": comment_id,
                    "text": text,
                    "from": {"id": "17841400000000901", "username": "test_buyer_01"},
                    "media": {"id": "17800000000000001", "media_product_type": "FEED"},
                },
            }
        ],
    }


def _meta_post(client, entries: list[dict]):
    from conduit.providers.meta.webhook import signature_header
    from tests.providers.meta.integration.conftest import APP_ID

    raw = json.dumps({"object": "instagram", "entry": entries}).encode()
    return client.post(
        f"/webhooks/meta/{APP_ID}/",
        data=raw,
        content_type="application/json",
        headers={
            "X-Hub-Signature-256": signature_header(
                body=raw, secret=META_ENV["CONDUIT_SOURCE_TEST_META_SECRET"]
            )
        },
    )


@pytest.fixture
def two_instagram_accounts(db, monkeypatch):
    from tests.providers.meta.integration.conftest import IG_ACCOUNT, register_meta

    for name, value in META_ENV.items():
        monkeypatch.setenv(name, value)
    return register_meta("ig-test", "meta-instagram", IG_ACCOUNT), register_meta(
        "ig-two", "meta-instagram", IG_OTHER
    )


@pytest.mark.django_db(transaction=True)
def test_a_refused_share_of_a_meta_body_is_taken_back_alone_and_the_other_share_commits(
    client, two_instagram_accounts
):
    """The first account's share conflicts with a stored comment (its statement raises inside the
    app body's transaction, under a savepoint); the second account's share is accepted and commits."""
    from tests.providers.meta.integration.conftest import IG_ACCOUNT

    assert _meta_post(client, [_meta_comment(IG_ACCOUNT, "17900000000000001", "price?")]).status_code == 200
    response = _meta_post(
        client,
        [
            _meta_comment(IG_ACCOUNT, "17900000000000001", "price, edited?"),
            _meta_comment(IG_ACCOUNT, "17900000000000002", "price too"),
            _meta_comment(IG_OTHER, "17900000000000003", "price for me"),
        ],
    )
    assert response.status_code == 200
    rows = [(r["source"], r["result"], r.get("reason_code", "")) for r in response.json()["results"]]
    assert rows == [
        ("ig-test", "quarantined", "identity_conflict"),
        ("ig-test", "rolled_back", ""),
        ("ig-two", "accepted", ""),
    ]
    assert sorted(InboundEvent.objects.values_list("source__name", "seen_count")) == [
        ("ig-test", 1),
        ("ig-two", 1),
    ]
    assert Delivery.objects.filter(source__name="ig-test").count() == 1  # the refused share claimed no id
    assert QuarantineReceipt.objects.get().reason_code == "identity_conflict"


# -- prepared statements and a migration on another connection -------------------------------


@pytest.fixture(params=[True, False], ids=["recovering", "positive_control_recovery_removed"])
def recovery(request):
    """conduit.prepared's recovering cursors, or (the control) a connection made without them."""
    from django.db.backends.signals import connection_created

    from conduit.prepared import recovering_cursors

    uid = "conduit.prepared.recovering_cursors"
    if not request.param:
        connection_created.disconnect(dispatch_uid=uid)
        connection.close()
    yield request.param
    if not request.param:
        connection_created.connect(recovering_cursors, dispatch_uid=uid)
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_column_widened_by_a_migration_does_not_leave_the_webhook_answering_503(
    recovery, client, two_instagram_accounts
):
    """Statements are prepared after 5 runs (CONDUIT_DB_PREPARE_THRESHOLD). A deploy's migration
    widens a column of the sources table on another connection (max_length 200 -> 300, the
    commonest migration there is): PostgreSQL refuses the held prepared statement ("cached plan
    must not change result type"). Outside a transaction the cursor forgets its prepared statements
    and runs the statement again: every request is answered as before the migration, where without
    it the connection answers 503 until it is recycled."""
    from tests.providers.meta.integration.conftest import IG_ACCOUNT

    for n in range(6):  # the app's source read runs on every delivery: prepared now
        assert (
            _meta_post(client, [_meta_comment(IG_ACCOUNT, f"1790000000000{n:04d}", "price?")]).status_code
            == 200
        )
    try:
        with _admin() as admin:
            admin.execute("ALTER TABLE ingress_source ALTER COLUMN account_ref TYPE varchar(300)")
        statuses = [
            _meta_post(client, [_meta_comment(IG_ACCOUNT, f"1790000000001{n:04d}", "price?")]).status_code
            for n in range(3)
        ]
        assert statuses == ([200, 200, 200] if recovery else [503, 503, 503]), statuses
    finally:
        with _admin() as admin:
            admin.execute("ALTER TABLE ingress_source ALTER COLUMN account_ref TYPE varchar(200)")
        connection.close()  # the next test must not meet this connection's prepared statements


@pytest.mark.django_db(transaction=True)
def test_a_column_added_to_sources_while_both_webhook_statements_are_prepared_is_met_by_a_fresh_read(
    sandbox_source, deliver
):
    """A column added on another connection: the source read lists its columns and the one statement
    returns none of the source's, so neither prepared statement changes its result; the cached row's
    text no longer matches (the new column prints too) and the body is decided on a fresh read."""
    for _ in range(6):
        selectors.source_by_name("sandbox")
    for n in range(1, 7):
        assert deliver(body(item(n))).status_code == 200
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        assert cursor.fetchone()[0] >= 2
    try:
        with _admin() as admin:
            admin.execute("ALTER TABLE ingress_source ADD COLUMN adversarial_extra integer DEFAULT 0")
        assert deliver(body(item(7))).status_code == 200
        assert deliver(body(item(8))).status_code == 200
        assert InboundEvent.objects.count() == 8
    finally:
        with _admin() as admin:
            admin.execute("ALTER TABLE ingress_source DROP COLUMN IF EXISTS adversarial_extra")
        connection.close()


# -- a value the store refuses, under a cached source, in autocommit ---------------------------


@pytest.mark.django_db(transaction=True)
def test_a_data_error_under_a_cached_source_is_one_receipt_and_leaves_the_connection_serving(
    sandbox_source, deliver, monkeypatch
):
    import conduit.providers.sandbox.webhook as sandbox_social
    from conduit.providers import base

    source_update(source_id=sandbox_source.pk, changes={"event_types": ["comment.created", "t" * 64]})
    assert deliver(body(item(1))).status_code == 200  # caches the source
    monkeypatch.setattr(base, "contract_refusal", lambda observation: None)
    monkeypatch.setattr(base, "MAX_REF_LENGTH", 400)
    monkeypatch.setattr(sandbox_social, "MAX_REF_LENGTH", 400)
    response = deliver(body(item(2), item(3, id="e" * 400, type="t" * 64)), delivery_id="msg_test_long")
    assert response.status_code == 202, response.json()
    assert response.json()["results"][0]["reason_code"] == "unstorable_value"
    assert QuarantineReceipt.objects.count() == 1
    assert not Delivery.objects.filter(delivery_id="msg_test_long").exists()
    assert InboundEvent.objects.count() == 1
    assert deliver(body(item(4))).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_one_delivery_id_sent_at_once_with_two_bodies_keeps_one_and_refuses_the_other(
    live_server, sandbox_source
):
    """16 posts of one delivery id at once, half with each of two bodies sharing event 1 in opposite
    orders: one body holds the id (every copy 200), the other's copies are 202 delivery_conflict,
    and nothing of the refused body is written."""
    first, second = body(item(1), item(2)), body(item(3), item(1))
    sends = [first, second] * 8
    signed = [(raw, sign(raw, delivery_id="msg_test_contested")) for raw in sends]
    barrier = threading.Barrier(len(signed))
    answers: list = [None] * len(signed)

    def run(i: int) -> None:
        barrier.wait()
        answers[i] = _post(live_server.url, *signed[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(signed))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    held = Delivery.objects.get()
    winner = (
        first
        if held.event_keys
        == sorted(
            InboundEvent.objects.filter(
                source_event_id__in=["evt_test_000001", "evt_test_000002"]
            ).values_list("event_key", flat=True)
        )
        else second
    )
    for raw, (status, payload) in zip(sends, answers):
        if raw == winner:
            assert status == 200, payload
        else:
            assert status == 202 and payload["results"][0]["reason_code"] == "delivery_conflict", payload
    assert held.seen_count == 8
    assert InboundEvent.objects.count() == 2 and set(
        InboundEvent.objects.values_list("seen_count", flat=True)
    ) == {8}


@pytest.mark.django_db(transaction=True)
def test_after_a_column_is_widened_the_webhooks_fresh_source_read_still_answers_refusals_and_forgeries(
    recovery, sandbox_source, deliver
):
    """The sandbox webhook's own fresh read of its source (run on every forged body and every
    refusal under the cache, so prepared soon) meets the same "cached plan must not change result
    type" after a migration widens a column: a forged body must stay a 401 and a refused body a 202,
    not a 503 on every such request for as long as the connection lives."""
    assert deliver(body(item(1))).status_code == 200  # caches the source
    forged = {"secret": "whsec_" + "QUJD" * 11}
    for n in range(6):  # each forged body reads the source afresh: that read is prepared now
        assert deliver(body(item(50 + n)), **forged).status_code == 401
    try:
        with _admin() as admin:
            admin.execute("ALTER TABLE ingress_source ALTER COLUMN account_ref TYPE varchar(300)")
        answers = [
            deliver(body(item(60)), **forged).status_code,
            deliver(body(item(61)), **forged).status_code,
            deliver(body(item(62, type="comment.unknown"))).status_code,
            deliver(body(item(63))).status_code,
        ]
        assert answers == ([401, 401, 202, 200] if recovery else [503, 503, 503, 200]), answers
    finally:
        with _admin() as admin:
            admin.execute("ALTER TABLE ingress_source ALTER COLUMN account_ref TYPE varchar(200)")
        connection.close()
