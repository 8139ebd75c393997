"""Search finds what a person types (conduit.search): ids, parts of keys, a post, a handle, words.

Each kind is typed into the events ledger, the reply ledger and a queue; handles and words are
found only by a person with the content permission. On PostgreSQL each search is answered by the
trigram index its expression names: a positive control spells the expression differently and
shows the index is no longer used.
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection

from conduit import search
from conduit.content import MESSAGE_CONTENT
from ingress.models import InboundEvent
from replies.models import ReplyAction

EVENTS = "/admin/ingress/inboundevent/"
ACTIONS = "/admin/replies/replyaction/"
QUEUE = "/admin/replies/reviewqueue/"
HANDLE = "northstar_buyer_test"


def _body(n: int, *, text: str, post: str = "post_test_07", handle: str = HANDLE) -> bytes:
    return json.dumps(
        {
            "account": "acct_test_01",
            "events": [
                {
                    "id": f"evt_test_c{n}",
                    "type": "comment.created",
                    "post_id": post,
                    "comment_id": f"msg_test_search{n}",
                    "from_id": f"person_test_{n}",
                    "from_handle": handle,
                    "created_at": "2026-01-15T14:30:00Z",
                    "text": text,
                }
            ],
        }
    ).encode()


@pytest.fixture
def comments(wire, deliver):
    wire()
    assert deliver(_body(1, text="CHECKLIST please, the blue one")).status_code == 200
    other = _body(2, text="CHECKLIST for my sister", post="post_test_99", handle="someone_else_test")
    assert deliver(other).status_code == 200
    return InboundEvent.objects.get(source_event_id="evt_test_c1")


def _staff(name: str, *, content: bool) -> User:
    user = User.objects.create_user(name, password="unused-test-password", is_staff=True)
    codenames = ["view_inboundevent", "view_replyaction", "view_reviewqueue"]
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    if content:
        user.user_permissions.add(Permission.objects.get(codename=MESSAGE_CONTENT.split(".")[1]))
    return user


def _found(client, url: str, term: str) -> list[str]:
    """The event keys of the rows a search shows (an action's through its event)."""
    response = client.get(url, {"q": term})
    assert response.status_code == 200, (url, term)
    rows = response.context["cl"].result_list
    return sorted({getattr(row, "event_id", None) or row.event_key for row in rows})


@pytest.mark.parametrize(
    "term",
    [
        "evt_test_c1",  # the event id as the platform sent it
        "EVT_TEST_C1",  # in any case
        "msg_test_search1",  # the comment id
        "sandbox-social:acct_test_01:comment.created:evt_test_c1",  # the whole key
        "created:evt_test_c1",  # part of the key
        "post_test_07",  # the post
    ],
)
def test_every_ledger_finds_an_event_by_what_a_person_has_in_front_of_them(client, comments, term):
    client.force_login(_staff("viewer_test", content=False))
    for url in (EVENTS, ACTIONS, QUEUE):
        assert _found(client, url, term) == [comments.event_key], (url, term)


@pytest.mark.parametrize("term", [HANDLE, "northstar", "blue one", "BLUE"])
def test_handles_and_words_are_found_only_with_the_content_permission(client, comments, term):
    client.force_login(_staff("reader_test", content=True))
    for url in (EVENTS, ACTIONS, QUEUE):
        assert _found(client, url, term) == [comments.event_key], (url, term)
    client.force_login(_staff("viewer_test", content=False))
    for url in (EVENTS, ACTIONS, QUEUE):
        assert _found(client, url, term) == [], (url, term)


def test_every_word_typed_must_match(client, comments):
    client.force_login(_staff("reader_test", content=True))
    assert len(_found(client, EVENTS, "checklist")) == 2
    assert _found(client, EVENTS, "checklist sister") == [
        InboundEvent.objects.get(source_event_id="evt_test_c2").event_key
    ]
    assert _found(client, EVENTS, "checklist nowhere_test") == []


def test_a_reply_key_is_found_by_its_start(client, comments):
    client.force_login(_staff("viewer_test", content=False))
    action = ReplyAction.objects.filter(event=comments).order_by("purpose").first()
    response = client.get(ACTIONS, {"q": action.reply_key[:12]})
    assert [row.pk for row in response.context["cl"].result_list] == [action.pk]
    assert search.reply_key_prefix("not-hex") is None


def test_a_term_too_short_for_trigrams_matches_a_whole_id(client, comments):
    client.force_login(_staff("viewer_test", content=False))
    assert _found(client, EVENTS, "c1") == []  # no event's id is "c1"


def test_a_whole_id_finds_exactly_its_rows_and_a_part_finds_every_row_holding_it(client, comments, deliver):
    assert deliver(_body(11, text="CHECKLIST too", post="post_test_07")).status_code == 200
    client.force_login(_staff("viewer_test", content=False))
    c1, c11 = (InboundEvent.objects.get(source_event_id=f"evt_test_c{n}").event_key for n in (1, 11))
    assert _found(client, EVENTS, "evt_test_c1") == [c1]
    assert _found(client, EVENTS, "test_c1") == sorted([c1, c11])


@pytest.mark.parametrize("term", ["___", "abc\x00def", "...", "%", "_"])
def test_a_term_with_no_trigram_or_a_nul_is_answered_not_refused(client, comments, term):
    client.force_login(_staff("reader_test", content=True))
    for url in (EVENTS, ACTIONS, QUEUE, "/admin/replies/reviewqueue/inbox/"):
        assert client.get(url, {"q": term}).status_code == 200, (url, term)


def test_retention_purges_the_handle_with_the_text(comments):
    from datetime import timedelta

    from django.utils import timezone

    from ingress.services.retention import retention_purge

    comments.refresh_from_db()
    assert comments.sender_handle == HANDLE
    retention_purge(now=timezone.now() + timedelta(days=400))
    comments.refresh_from_db()
    assert (comments.sender_handle, comments.message_text) == ("", "")


def test_the_migration_creates_the_indexes_the_queries_spell():
    from importlib import import_module

    migration = import_module("ingress.migrations.0023_search_indexes")
    assert dict(migration.INDEXES) == {
        "inbound_event_ids_trgm": search.haystack_sql(search.ID_COLUMNS),
        "inbound_event_words_trgm": search.haystack_sql(search.WORD_COLUMNS),
    }


def _plan(queryset) -> str:
    """The plan of `queryset` unordered, with sequential scans priced out (a test table is tiny)."""
    sql, params = queryset.order_by().query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")  # a tiny table: whole-index walks too
        cursor.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cursor.fetchall())


pg_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_trgm is PostgreSQL's")


@pg_only
@pytest.mark.parametrize(
    ("term", "words", "index"),
    [
        ("test_c1", False, "inbound_event_ids_trgm"),  # part of an id (a whole one reads its own index)
        ("northstar", True, "inbound_event_words_trgm"),
    ],
)
def test_each_search_reads_its_trigram_index(comments, term, words, index):
    events = search.events_matching(InboundEvent.objects.all(), term, words=words)
    assert index in _plan(events)  # the ledgers and the inbox read their events' ids through it


@pg_only
def test_positive_control_an_expression_spelled_otherwise_reads_no_index(comments, monkeypatch):
    monkeypatch.setattr(search.Haystack, "arg_joiner", " || '|' || ")
    events = search.events_matching(InboundEvent.objects.all(), "test_c1", words=False)
    assert "inbound_event_ids_trgm" not in _plan(events)


def test_a_finding_is_found_by_its_event_s_id(admin_client, provider, wire, deliver, scan):
    """A complete scan of a source that does not show the event: its SOURCE_UNVERIFIED finding is
    found by the event id a person has, as the event is."""
    from reconcile.models import Finding

    source = wire(provider())
    assert deliver(_body(1, text="CHECKLIST please")).status_code == 200
    scan(source)
    finding = Finding.objects.get(kind="SOURCE_UNVERIFIED")
    response = admin_client.get("/admin/reconcile/finding/", {"q": "evt_test_c1"})
    assert [row.pk for row in response.context["cl"].result_list] == [finding.pk]
    response = admin_client.get("/admin/reconcile/finding/", {"q": "evt_test_none"})
    assert list(response.context["cl"].result_list) == []


@pytest.mark.parametrize("dense", [1, 100])
def test_the_ids_found_are_the_filter_s_however_they_are_read(comments, deliver, monkeypatch, dense):
    """event_ids leaves a dense term to the planner and reads a sparse one from the index: either
    way, the same rows."""
    for n in range(3, 9):
        assert deliver(_body(n, text=f"CHECKLIST number {n}")).status_code == 200
    monkeypatch.setattr(search, "DENSE", dense)
    for term, words in (("checklist", True), ("test_c", False), ("number", True), ("evt_test_c3", False)):
        expected = set(
            search.events_matching(InboundEvent.objects.all(), term, words=words).values_list("id", flat=True)
        )
        assert expected, term
        found = search.event_ids(InboundEvent.objects.all(), term, words=words)
        assert set(InboundEvent.objects.filter(pk__in=found).values_list("id", flat=True)) == expected, term
        if isinstance(found, list):
            assert found == sorted(expected, reverse=True), term  # newest first


@pg_only
def test_the_sparse_rest_is_read_from_the_trigram_index(comments, monkeypatch):
    from django.test.utils import CaptureQueriesContext

    monkeypatch.setattr(search, "DENSE", 100)  # two comments are no page: sparse, read from the index
    with CaptureQueriesContext(connection) as queries:
        search.event_ids(InboundEvent.objects.all(), "test_c", words=False)
    sql = [q["sql"] for q in queries.captured_queries]
    off = "SELECT set_config('enable_indexscan', 'off', true), set_config('enable_seqscan', 'off', true)"
    back = "SELECT set_config('enable_indexscan', 'on', true), set_config('enable_seqscan', 'on', true)"
    assert off in sql and back in sql
    read = [i for i, q in enumerate(sql) if q.startswith('SELECT "inbound_events"."id"') and "WHERE" in q]
    assert len(read) == 1 and sql.index(off) < read[0] < sql.index(back)  # the read between the two
    with connection.cursor() as cursor:  # nothing of it outlives the query
        cursor.execute("SHOW enable_indexscan")
        assert cursor.fetchone()[0] == "on"
