"""The same promises for Meta's platforms, through Meta's proof, field maps and Graph read-back."""

from __future__ import annotations

import secrets

from conduit.standins import testkit
from ingress.models import InboundEvent, QuarantineReceipt
from platforms.meta.acceptance import META_TIMEOUT_SECONDS, PURPOSES, MetaHarness
from replies.contract import reply_key
from replies.models import ReplyAction, SendAttempt


def _core():
    """The core checks' helpers, imported when a check runs: the acceptance table loads this module."""
    from reconcile.proof.acceptance import checks

    return checks


def meta_source_proof(h: MetaHarness) -> list[str]:
    """A Meta body signed with another secret is 401, quarantined, and plans nothing."""
    body = h.body((h.comment("CHECKLIST please"), "CHECKLIST please"))
    response = h.deliver(body, secret=secrets.token_hex(16))
    failures = []
    if response.status_code != 401:
        failures.append(f"invalid proof answered {response.status_code}, expected 401")
    if not QuarantineReceipt.objects.filter(
        reason_code="invalid_signature", state="QUARANTINED", authenticated=False
    ).exists():
        failures.append("no unauthenticated QUARANTINED receipt for the invalid proof")
    if ReplyAction.objects.exists() or InboundEvent.objects.exists():
        failures.append("invalid proof created an event or reply actions")
    return failures


def meta_event_identity(h: MetaHarness) -> list[str]:
    """The same body twice is one delivery seen twice; a retry batched with another comment adds
    only that comment: one row per comment, keyed `meta-instagram:<account>:comment.created:<id>`.

    Also run for a comment whose text does not match the trigger, delivered
    twice: it plans no reply, so its event key is the only guard (as the
    sandbox row's comment__no_trigger).
    """
    first, second = h.comment("CHECKLIST please"), h.comment("CHECKLIST for two")
    quiet = h.comment("lovely photo")
    single = h.body((first, "CHECKLIST please"))
    untriggered = h.body((quiet, "lovely photo"))
    statuses = [
        h.deliver(single).status_code,
        h.deliver(single).status_code,
        h.deliver(h.body((first, "CHECKLIST please"), (second, "CHECKLIST for two"))).status_code,
        h.deliver(untriggered).status_code,
        h.deliver(untriggered).status_code,
    ]
    failures = []
    if statuses != [200] * 5:
        failures.append(f"deliveries answered {statuses}, expected {[200] * 5}")
    for comment, seen in ((first, 3), (second, 1), (quiet, 2)):
        rows = list(InboundEvent.objects.filter(event_key=h.key(comment)))
        if len(rows) != 1:
            failures.append(f"comment {comment}: expected exactly one event row, found {len(rows)}")
        elif rows[0].seen_count != seen:
            failures.append(f"comment {comment}: expected seen_count {seen}, found {rows[0].seen_count}")
    if InboundEvent.objects.count() != 3:
        failures.append(f"expected 3 event rows in all, found {InboundEvent.objects.count()}")
    return failures


def meta_reconciliation(h: MetaHarness) -> list[str]:
    """The simulator holds a delivered comment and one whose webhook never came; after two
    complete scans each has one row and one action per purpose under the derived keys, both
    MATCHED, no identity conflict, and the Graph calls stayed on this host."""
    delivered, missed = h.comment("CHECKLIST please"), h.comment("CHECKLIST for two")
    h.deliver(h.body((delivered, "CHECKLIST please")))
    failures = []
    for attempt in ("first", "second"):
        outcome = h.scan()
        if outcome.state != "published":
            return failures + [f"{attempt} scan ended {outcome.state}, expected published"]
        for comment in (delivered, missed):
            key = h.key(comment)
            if InboundEvent.objects.filter(event_key=key).count() != 1:
                failures.append(f"{attempt} scan: not exactly one row for comment {comment}")
            for purpose in PURPOSES:
                keys = list(
                    ReplyAction.objects.filter(event_id=key, purpose=purpose).values_list(
                        "reply_key", flat=True
                    )
                )
                if keys != [reply_key(key, purpose)]:
                    failures.append(f"{attempt} scan: {purpose} of comment {comment} has keys {keys}")
    statuses = set(InboundEvent.objects.values_list("reconcile_status", flat=True))
    if statuses != {"MATCHED"}:
        failures.append(f"the events are {sorted(statuses)}, expected all MATCHED")
    if QuarantineReceipt.objects.filter(reason_code="identity_conflict").exists():
        failures.append("the webhook and the read-back disagreed on a payload (identity_conflict)")
    from reconcile.models import ReconcileReport

    report = ReconcileReport.objects.order_by("-pk").first()
    counts = report.summary["counts"] if report else {}
    if not counts.get("page_calls"):
        failures.append("the scans made no page call: nothing was read back")
    if counts.get("external_calls") != 0:
        failures.append(f"the scans called off this host: external_calls {counts.get('external_calls')}")
    return failures


def meta_approval_gate(h: MetaHarness) -> list[str]:
    """An Instagram comment's action in REVIEW_PENDING produces zero Graph writes, whatever tries to send it."""
    action = h.planned()
    _core()._everything_that_sends(action.pk)
    action.refresh_from_db()
    failures = []
    if h.graph_writes():
        failures.append(f"an unapproved action reached the Graph API with {h.graph_writes()} write(s)")
    if h.applied() != {"public": {}, "private": {}}:
        failures.append(f"the simulator applied {h.applied()} for an unapproved action")
    if action.delivery_state != "REVIEW_PENDING":
        failures.append(f"an unapproved action moved to {action.delivery_state}")
    return failures


def meta_safe_retry(h: MetaHarness) -> list[str]:
    """Meta's throttling answer (80002: not applied) then a success: one reply applied, under the
    same reply key, on one action with attempts 1 and 2."""
    from replies.sender import reply_send

    action = h.planned()
    comment = action.event_id.rsplit(":", 1)[1]
    _core()._approve(action)
    h.fail_next("error", code=80002, status=400)
    first = reply_send(action_id=action.pk)
    action.refresh_from_db()
    failures = []
    if first == "FAILED_BEFORE_SEND" and action.next_attempt_at is None:
        failures.append("the throttled send was not scheduled for an automatic retry")
    # The wait Meta's throttling imposes (the action's backoff, the account's pause) has passed.
    testkit.action_due_now(action.pk)
    testkit.send_budget_unpaused(h.source.pk)
    second = reply_send(action_id=action.pk)
    if (first, second) != ("FAILED_BEFORE_SEND", "SENT"):
        failures.append(f"expected FAILED_BEFORE_SEND then SENT, got {first} then {second}")
    numbers = list(SendAttempt.objects.filter(action=action).values_list("attempt_number", flat=True))
    if numbers != [1, 2]:
        failures.append(f"expected attempts 1 and 2 on one action, found {numbers}")
    action.refresh_from_db()
    if action.reply_key != reply_key(action.event_id, action.purpose):
        failures.append(f"the action's reply key changed to {action.reply_key[:12]}…")
    applied = h.applied()
    if applied != {"public": {comment: 1}, "private": {}}:
        failures.append(f"the simulator applied {applied}, expected one public reply to {comment}")
    if ReplyAction.objects.filter(event=action.event, purpose=action.purpose).count() != 1:
        failures.append("the retry created another action")
    return failures


def meta_ambiguous_send(h: MetaHarness) -> list[str]:
    """The simulator applies the reply and never answers (apply_then_timeout): SEND_STATUS_UNKNOWN,
    never retried automatically, applied exactly once."""
    from replies.sender import reply_send

    action = h.planned()
    comment = action.event_id.rsplit(":", 1)[1]
    _core()._approve(action)
    h.fail_next("apply_then_timeout")
    with testkit.transport_timeout(META_TIMEOUT_SECONDS):
        reached = reply_send(action_id=action.pk)
        _core()._everything_that_sends(action.pk)
    failures = _core()._parked_not_retried(action, reached)
    if h.graph_writes() != 1:
        failures.append(f"{h.graph_writes()} Graph writes, expected 1")
    applied = h.applied()
    if applied != {"public": {comment: 1}, "private": {}}:
        failures.append(f"the simulator applied {applied}, expected exactly one public reply to {comment}")
    return failures
