"""The replies changelists run a constant number of queries whatever the page size."""

import pytest
from django.utils import timezone

from replies import selectors
from replies.models import SendAttempt
from tests.conftest import actions_cloned

# Session, user, the page's count and rows, the prefetch/annotations, and the list filters'
# choices: the same at any page size. A query per row would pass it at 2 rows and fail at 40.
MAX_QUERIES = 9  # measured: 7 for the review queue and the ledger, 9 for the stranded queue


@pytest.mark.parametrize("rows", [2, 40])
def test_the_review_queue_asks_nothing_per_row(
    admin_client, wire, planned, rows, django_assert_max_num_queries
):
    wire()
    actions_cloned(planned, rows)
    with django_assert_max_num_queries(MAX_QUERIES):
        page = admin_client.get("/admin/replies/reviewqueue/")
    assert page.status_code == 200
    assert page.content.decode().count("nothing: ready to approve") == rows + 2  # + the planned pair


@pytest.mark.parametrize("rows", [2, 40])
@pytest.mark.parametrize("changelist", ["replyaction", "replyroute", "replycopy", "sendattempt"])
def test_the_other_replies_changelists_ask_nothing_per_row(
    admin_client, wire, planned, rows, changelist, django_assert_max_num_queries
):
    wire()
    actions_cloned(planned, rows)
    with django_assert_max_num_queries(MAX_QUERIES):
        assert admin_client.get(f"/admin/replies/{changelist}/").status_code == 200


@pytest.mark.parametrize("rows", [2, 40])
def test_the_stranded_queue_asks_nothing_per_row(
    admin_client, wire, planned, rows, django_assert_max_num_queries
):
    wire()
    for action in actions_cloned(
        planned,
        rows,
        delivery_state="FAILED_BEFORE_SEND",
        attempt_count=2,
        last_error_code="live_send_disabled",
    ):
        for number in (1, 2):
            SendAttempt.objects.create(
                action=action,
                attempt_number=number,
                at=timezone.now(),
                transport="not_sent",
                evidence=f"evidence_{number}",
                transport_name="x",
            )
    with django_assert_max_num_queries(MAX_QUERIES):
        page = admin_client.get("/admin/replies/strandedsendqueue/")
    assert page.status_code == 200
    html = page.content.decode()
    # The latest attempt of each row, not the first.
    assert html.count("attempt 2 at") == rows and "attempt 1 at" not in html


@pytest.mark.parametrize(
    "queue, guard",
    [
        ("reviewqueue", "with_approval_needs"),
        ("strandedsendqueue", "with_last_attempt"),
    ],
)
def test_positive_control_without_the_prefetch_each_row_queries(
    admin_client, wire, planned, monkeypatch, queue, guard
):
    """Break the guard: without the annotation or prefetch, 40 rows cost more than the bound."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    wire()
    actions = (
        actions_cloned(planned, 40, delivery_state="FAILED_BEFORE_SEND", last_error_code="live_send_disabled")
        if queue == "strandedsendqueue"
        else actions_cloned(planned, 40)
    )
    assert actions
    monkeypatch.setattr(selectors, guard, lambda queryset: queryset)
    with CaptureQueriesContext(connection) as queries:
        assert admin_client.get(f"/admin/replies/{queue}/").status_code == 200
    assert len(queries) > MAX_QUERIES + 30
