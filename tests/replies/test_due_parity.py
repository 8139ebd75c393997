"""The claim's plain-SQL due rule (_due_sql) and the ORM's (_due) select the same rows; the claim
walks the claimable index in id order whatever the backlog."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from ingress.models import InboundEvent, Source
from replies.models import DeliveryState, ReplyAction, SendBudget
from replies.sender import claim as sender
from tests.conftest import account_campaign

pytestmark = pytest.mark.django_db
AT = timezone.now() - timedelta(days=1)


def _event(source: Source, n: int) -> InboundEvent:
    return InboundEvent.objects.create(
        event_key=f"evt_test_parity_{n}",
        source=source,
        source_system="sandbox_social",
        source_account_ref=source.account_ref,
        source_event_id=f"evt_test_parity_{n}",
        event_type="comment.created",
        conversation_ref="post_test",
        message_ref=f"c_{n}",
        sender_ref="user_test",
        occurred_at=AT,
        occurred_at_original="2026-01-02T03:04:05Z",
        payload_hash="0" * 64,
        contract_version="1",
        canary=False,
        trigger_rule_version=1,
        trigger_match=True,
        event_state="RECORD_READY",
        first_received_at=AT,
        last_received_at=AT,
    )


@pytest.fixture
def grid(sandbox_source):
    """Every state x next_attempt_at (none, past, exactly now, future) x purpose, on a source in
    good standing, on one whose token needs re-authorisation, and on one in good standing without
    budgets (a pause holds its own source's actions only); budgets paused (future), paused until
    exactly now, and paused in the past."""
    now = timezone.now()
    stopped = Source.objects.get(pk=sandbox_source.pk)
    stopped.pk, stopped.name, stopped.account_ref, stopped.needs_reauth = (
        None,
        "parity-stopped",
        "acct_test_02",
        True,
    )
    stopped.save()
    unpaused = Source.objects.get(pk=sandbox_source.pk)
    unpaused.pk, unpaused.name, unpaused.account_ref = None, "parity-unpaused", "acct_test_03"
    unpaused.save()
    n = 0
    for source in (sandbox_source, stopped, unpaused):
        for purpose in ("public_ack", "private_delivery", "extra_purpose"):
            for state in DeliveryState.values:
                for next_at in (None, now - timedelta(seconds=5), now, now + timedelta(seconds=30)):
                    n += 1
                    ReplyAction.objects.create(
                        reply_key=f"{n:064d}",
                        event=_event(source, n),
                        purpose=purpose,
                        campaign=account_campaign(source),
                        campaign_version=1,
                        delivery_state=state,
                        next_attempt_at=next_at,
                        created_at=AT,
                    )
    SendBudget.objects.create(
        source=sandbox_source, purpose="public_ack", paused_until=now + timedelta(minutes=5)
    )
    SendBudget.objects.create(source=sandbox_source, purpose="private_delivery", paused_until=now)
    SendBudget.objects.create(
        source=sandbox_source, purpose="extra_purpose", paused_until=now - timedelta(minutes=5)
    )
    return now, sandbox_source, unpaused


def orm_due(now) -> set[int]:
    return set(ReplyAction.objects.filter(sender._due(now)).values_list("id", flat=True))


def sql_due(now) -> set[int]:
    due, count = sender._due_sql("a")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT a.id FROM reply_actions a WHERE {due}", [now] * count)
        return {row[0] for row in cursor.fetchall()}


def test_the_plain_sql_due_rule_selects_exactly_the_orms_rows(grid):
    """The plain SQL written beside `_due` and `_due` itself hold the same rows (a parity test). Non-trivial: both keep and drop rows of every kind in the grid."""
    now, source, unpaused = grid
    due = orm_due(now)
    assert sql_due(now) == due
    rows = ReplyAction.objects.filter(id__in=due)
    assert set(rows.values_list("delivery_state", flat=True)) == {"APPROVED", "FAILED_BEFORE_SEND"}
    assert set(rows.values_list("event__source_id", flat=True)) == {
        source.pk,
        unpaused.pk,
    }  # not the re-auth one
    paused_source = rows.filter(event__source=source)
    assert set(paused_source.values_list("purpose", flat=True)) == {"private_delivery", "extra_purpose"}
    # The pause is the source's own: another source's public replies stay due.
    assert set(rows.filter(event__source=unpaused).values_list("purpose", flat=True)) == {
        "public_ack",
        "private_delivery",
        "extra_purpose",
    }
    # FAILED_BEFORE_SEND: due at its time or after, not before, not without one.
    failed = paused_source.filter(delivery_state="FAILED_BEFORE_SEND")
    assert failed.count() == 4  # 2 purposes x (past, now)
    assert not failed.filter(next_attempt_at__gt=now).exists()


@pytest.mark.parametrize("broken", ["sql_ignores_pauses", "sql_pause_on_any_source", "orm_backoff_strict"])
def test_positive_control_a_rule_changed_on_one_side_fails_the_parity(grid, monkeypatch, broken):
    """Change one side only: the parity check above no longer holds."""
    now, *_ = grid
    if broken == "sql_ignores_pauses":
        real = sender._due_sql

        def without_pauses(a):
            sql, count = real(a)
            return sql.split(" AND NOT EXISTS (SELECT 1 FROM reply_send_budgets")[0], count - 1

        monkeypatch.setattr(sender, "_due_sql", without_pauses)
    elif broken == "sql_pause_on_any_source":
        real = sender._due_sql

        def pause_everywhere(a):  # a paused budget holds its purpose on every source
            sql, count = real(a)
            return sql.replace(
                f"JOIN inbound_events e ON e.source_id = b.source_id "
                f"WHERE e.event_key = {a}.event_key AND b.purpose",
                "WHERE b.purpose",
            ), count

        assert "WHERE b.purpose" in pause_everywhere("a")[0]
        monkeypatch.setattr(sender, "_due_sql", pause_everywhere)
    else:
        monkeypatch.setitem(
            sender.CLAIMABLE, DeliveryState.FAILED_BEFORE_SEND, lambda now: {"next_attempt_at__lt": now}
        )
    assert sql_due(now) != orm_due(now)


def _claim_plan(backlog: int) -> str:
    """EXPLAIN ANALYZE of the draining claim's statement over `backlog` due actions (rolled back)."""
    from django.db import transaction

    sql, template, now_at = sender._claim_sql(by_id=False)
    params = list(template)
    for i in now_at:
        params[i] = timezone.now()
    with transaction.atomic():
        with connection.cursor() as cursor:
            # One event per action, as ingest makes them, and fresh statistics on every table (the
            # planner then knows the one source needs no re-auth, and still misjudged the old shape).
            columns = [f.column for f in InboundEvent._meta.concrete_fields if f.column != "id"]
            values = [
                "'evt_test_bulk_' || g" if c in ("event_key", "source_event_id") else c for c in columns
            ]
            cursor.execute(
                f"INSERT INTO inbound_events ({', '.join(columns)}) SELECT {', '.join(values)} "
                "FROM inbound_events, generate_series(1, %s) g WHERE event_key = %s",
                [backlog, "evt_test_parity_1"],
            )
            cursor.execute(
                "INSERT INTO reply_actions (reply_key, event_key, purpose, campaign_id, campaign_version, channel, "
                "copy_version, approval_state, approved_by, delivery_state, provider_reply_id, attempt_count, "
                "last_error_code, canary, created_at) "
                "SELECT lpad(g::text, 64, '0'), 'evt_test_bulk_' || g, 'public_ack', c.id, 1, '', '', 'APPROVED', '', "
                "'APPROVED', '', 0, '', false, now() FROM generate_series(1, %s) g, "
                "(SELECT id FROM reply_campaigns WHERE account_default LIMIT 1) c",
                [backlog],
            )
            cursor.execute("ANALYZE")
            cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + sql, params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        transaction.set_rollback(True)
    return plan


def test_the_claim_walks_the_claimable_index_in_id_order_at_a_large_backlog(sandbox_source):
    """A plan walking the `reply_action_claimable` index in id order (checked with EXPLAIN
    at a 10k+ backlog) makes the claim's cost independent of the backlog. Without it: a sequential
    scan of every due row, both anti-joins over all of them, then a sort, for one row."""
    _event(sandbox_source, 1)
    plan = _claim_plan(12_000)
    lock_read = plan.split("CTE moved")[0]
    assert "Index Scan using reply_action_claimable" in lock_read, plan
    assert "Sort" not in lock_read, plan
    assert "rows=12000" not in lock_read, plan  # one row read, not the backlog
