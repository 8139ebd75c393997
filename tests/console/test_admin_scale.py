"""The admin at a million rows (docs/benchmarks.md#admin): no whole-ledger counts or scans per page.

`make bench-admin` measures the pages at 1M events; these tests pin the query shapes that
made them fast, each with a positive control putting the old behaviour back. Searches read
their trigram indexes: tests/console/test_search.py.
"""

import re

import pytest
from django.contrib import admin
from django.core.paginator import Paginator
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conduit import admin as conduit_admin
from ingress.models import InboundEvent
from replies.models import ReplyAction, ReviewQueue

EVENTS = "/admin/ingress/inboundevent/"
WHOLE_EVENT_COUNT = re.compile(r'^SELECT COUNT\(\*\) AS "__count" FROM "inbound_events"$')


def _sql(client, url: str) -> list[str]:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return [q["sql"] for q in queries.captured_queries]


@pytest.fixture
def events(admin_client, wire, planned):
    wire()
    planned()
    return InboundEvent.objects.get()


def test_the_events_changelist_counts_no_whole_table(admin_client, events):
    """No full-table counts; show_full_result_count off where it costs."""
    filtered = f"{EVENTS}?event_state__exact={events.event_state}"
    for url in (EVENTS, filtered):
        assert not [sql for sql in _sql(admin_client, url) if WHOLE_EVENT_COUNT.match(sql)], url


def test_positive_control_a_full_result_count_is_a_whole_table_count(admin_client, events, monkeypatch):
    # The check above sees a whole-table COUNT(*) when Django's full result count is back on.
    monkeypatch.setattr(admin.site._registry[InboundEvent], "show_full_result_count", True)
    filtered = f"{EVENTS}?event_state__exact={events.event_state}"
    assert [sql for sql in _sql(admin_client, filtered) if WHOLE_EVENT_COUNT.match(sql)]


def test_positive_control_django_s_paginator_counts_the_whole_table(admin_client, events, monkeypatch):
    monkeypatch.setattr(admin.site._registry[InboundEvent], "paginator", Paginator)
    assert [sql for sql in _sql(admin_client, EVENTS) if WHOLE_EVENT_COUNT.match(sql)]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the estimate is PostgreSQL's planner's")
def test_past_the_limit_the_count_is_the_planner_s_estimate_and_the_page_says_about(
    admin_client, events, monkeypatch
):
    monkeypatch.setattr(conduit_admin, "EXACT_COUNT_LIMIT", 1)
    paginator = conduit_admin.EstimatedCountPaginator(ReplyAction.objects.all(), 100)
    assert paginator.count >= 2 and paginator.estimated  # 2 actions: over the limit of 1
    page = admin_client.get("/admin/replies/replyaction/").content.decode()
    assert re.search(r"about</span> \d+ reply actions", page)


def test_under_the_limit_the_count_is_exact(admin_client, events):
    paginator = conduit_admin.EstimatedCountPaginator(ReplyAction.objects.all(), 100)
    assert paginator.count == 2 and not paginator.estimated
    page = admin_client.get("/admin/replies/replyaction/").content.decode()
    assert "2 reply actions" in page and "about</span>" not in page


def test_the_events_changelist_has_no_date_hierarchy_scan(admin_client, events):
    """The date hierarchy read MIN/MAX and the DISTINCT months of the whole ledger on every view."""
    queries = _sql(admin_client, EVENTS)
    assert not [sql for sql in queries if "DATE_TRUNC" in sql.upper() or 'MIN("inbound_events"' in sql]
    # Dates are still a filter.
    assert "first_received_at__gte" in admin_client.get(EVENTS).content.decode()


def test_positive_control_the_date_hierarchy_scans(admin_client, events, monkeypatch):
    monkeypatch.setattr(admin.site._registry[InboundEvent], "date_hierarchy", "first_received_at")
    assert [sql for sql in _sql(admin_client, EVENTS) if 'MIN("inbound_events"' in sql]


def test_the_purpose_filter_lists_declared_purposes_without_a_distinct_scan(admin_client, events):
    url = "/admin/replies/reviewqueue/"
    queries = _sql(admin_client, url)
    assert not [sql for sql in queries if 'DISTINCT "reply_actions"."purpose"' in sql]
    page = admin_client.get(url).content.decode()
    assert "?purpose=public_ack" in page and "?purpose=private_delivery" in page
    filtered = admin_client.get(url, {"purpose": "public_ack"}).content.decode()
    assert "1 review queue item" in filtered


def test_positive_control_django_s_all_values_filter_scans(admin_client, events, monkeypatch):
    monkeypatch.setattr(admin.site._registry[ReviewQueue], "list_filter", ("event__source", "purpose"))
    assert [
        sql
        for sql in _sql(admin_client, "/admin/replies/reviewqueue/")
        if 'DISTINCT "reply_actions"."purpose"' in sql
    ]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="reads PostgreSQL's plan")
@pytest.mark.parametrize(
    "ordering, drop_index, uses_index",
    [
        (None, False, True),  # the queue's own ordering
        (("-reply_deadline", "id"), False, False),  # positive control: an order the index does not hold
        (
            None,
            True,
            False,
        ),  # positive control: without the migration's index, every pending action is sorted
    ],
)
def test_the_review_queue_reads_its_page_in_index_order(
    rf, admin_user, events, ordering, drop_index, uses_index, monkeypatch
):
    """The queue's page comes from reply_action_review_order in order, with no sort of every pending action."""
    model_admin = admin.site._registry[ReviewQueue]
    if ordering:
        monkeypatch.setattr(model_admin, "ordering", ordering)
    request = rf.get("/admin/replies/reviewqueue/")
    request.user = admin_user
    rows = model_admin.get_queryset(request).order_by(*model_admin.get_ordering(request))[:100]
    sql, params = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        if drop_index:
            cursor.execute("DROP INDEX reply_action_review_order")  # rolled back with the test
        # A few rows here: make the planner choose as it does at a million (a sort is dearer than the index).
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute("EXPLAIN " + sql, params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    top = plan.split("SubPlan")[0]
    assert ("reply_action_review_order" in top and "Sort" not in top) is uses_index, plan


COUNT_SQL = re.compile(r"^SELECT COUNT\(\*\)")


@pytest.mark.parametrize("queue", ["reviewqueue", "unknownsendqueue"])
def test_a_queue_s_count_reads_no_event_ledger(admin_client, events, queue):
    """The per-page annotations join the event inside their subqueries, so counting the queue reads
    reply_actions alone (at 40k pending actions the join cost 150 ms per page view)."""
    counts = [sql for sql in _sql(admin_client, f"/admin/replies/{queue}/") if COUNT_SQL.match(sql)]
    assert counts and not [sql for sql in counts if "inbound_events" in sql], counts


def test_positive_control_an_outer_join_annotation_is_in_the_count(admin_client, events, monkeypatch):
    from django.db.models import Exists, OuterRef

    from replies import selectors
    from replies.models import ReplyCopy

    def outer_join(actions):  # the annotation as it was: OuterRef through the event
        return actions.annotate(
            copy_present=Exists(
                ReplyCopy.objects.filter(source_id=OuterRef("event__source_id"), purpose=OuterRef("purpose"))
            )
        )

    monkeypatch.setattr(selectors, "with_approval_needs", outer_join)
    counts = [sql for sql in _sql(admin_client, "/admin/replies/unknownsendqueue/") if COUNT_SQL.match(sql)]
    assert [sql for sql in counts if "inbound_events" in sql]
