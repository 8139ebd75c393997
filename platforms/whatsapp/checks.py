"""The same promises for WhatsApp: Meta's proof on its callback, one event per wamid, nothing sent
before approval, throttling retried under the same key, and an ambiguous send parked until the
status carrying its reply key settles it."""

from __future__ import annotations

import secrets

from conduit.standins import testkit
from ingress.models import InboundEvent, QuarantineReceipt
from platforms.whatsapp.acceptance import WHATSAPP_TIMEOUT_SECONDS, WhatsAppHarness
from replies.contract import reply_key
from replies.models import ReplyAction, ReplyTransition, SendAttempt


def _core():
    """The core checks' helpers, imported when a check runs: the acceptance table loads this module."""
    from reconcile.proof.acceptance import checks

    return checks


def whatsapp_source_proof(h: WhatsAppHarness) -> list[str]:
    """A WhatsApp body signed with another secret is 401, quarantined, and plans nothing."""
    _, body = h.message("CHECKLIST please")
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


def whatsapp_event_identity(h: WhatsAppHarness) -> list[str]:
    """The same body twice is one message seen twice; a retry batched with another message adds
    only that message; a message without the keyword (no reply planned, so its event key is the
    only guard) delivered twice stays one row. Keys `meta-whatsapp:<number>:message.created:<wamid>`."""
    (first, first_body), (second, second_body) = h.message("CHECKLIST please"), h.message("CHECKLIST x2")
    quiet, quiet_body = h.message("lovely shop")
    statuses = [
        h.deliver(first_body).status_code,
        h.deliver(first_body).status_code,
        h.deliver(h.merged(first_body, second_body)).status_code,
        h.deliver(quiet_body).status_code,
        h.deliver(quiet_body).status_code,
    ]
    failures = []
    if statuses != [200] * 5:
        failures.append(f"deliveries answered {statuses}, expected {[200] * 5}")
    for wamid, seen in ((first, 3), (second, 1), (quiet, 2)):
        rows = list(InboundEvent.objects.filter(event_key=h.key(wamid)))
        if len(rows) != 1:
            failures.append(f"message {wamid[:16]}…: expected exactly one event row, found {len(rows)}")
        elif rows[0].seen_count != seen:
            failures.append(f"message {wamid[:16]}…: expected seen_count {seen}, found {rows[0].seen_count}")
    if InboundEvent.objects.count() != 3:
        failures.append(f"expected 3 event rows in all, found {InboundEvent.objects.count()}")
    return failures


def whatsapp_approval_gate(h: WhatsAppHarness) -> list[str]:
    """A buyer's message's action in REVIEW_PENDING makes zero Cloud API sends, whatever tries to send it."""
    action = h.planned()
    _core()._everything_that_sends(action.pk)
    action.refresh_from_db()
    failures = []
    if h.sends_asked():
        failures.append(f"an unapproved action reached the Cloud API with {h.sends_asked()} send(s)")
    if h.applied():
        failures.append(f"the simulator applied {h.applied()} for an unapproved action")
    if action.delivery_state != "REVIEW_PENDING":
        failures.append(f"an unapproved action moved to {action.delivery_state}")
    return failures


def whatsapp_safe_retry(h: WhatsAppHarness) -> list[str]:
    """WhatsApp's throughput answer (130429: not applied) then a success: one message applied,
    under the same reply key, on one action with attempts 1 and 2."""
    from replies.sender import reply_send

    action = h.planned()
    _core()._approve(action)
    h.fail_next("error", code=130429, status=400)
    first = reply_send(action_id=action.pk)
    action.refresh_from_db()
    failures = []
    if first == "FAILED_BEFORE_SEND" and action.next_attempt_at is None:
        failures.append("the throttled send was not scheduled for an automatic retry")
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
    if h.applied() != {action.reply_key: 1}:
        failures.append(f"the simulator applied {h.applied()}, expected one message under the reply key")
    return failures


def whatsapp_ambiguous_send(h: WhatsAppHarness) -> list[str]:
    """The simulator applies the message and never answers (apply_then_timeout): SEND_STATUS_UNKNOWN,
    never retried; then the statuses it posts, carrying the reply key, settle it as SENT by
    `system:status` without a person, and it is applied exactly once."""
    from replies.sender import reply_send

    action = h.planned()
    _core()._approve(action)
    h.fail_next("apply_then_timeout")
    seen = len(h.recorder.bodies)
    with testkit.transport_timeout(WHATSAPP_TIMEOUT_SECONDS):
        reached = reply_send(action_id=action.pk)
        _core()._everything_that_sends(action.pk)
    failures = _core()._parked_not_retried(action, reached)
    if h.sends_asked() != 1:
        failures.append(f"{h.sends_asked()} Cloud API sends, expected 1")
    statuses = h.statuses(seen, 3)
    if len(statuses) != 3:
        return failures + [f"the simulator posted {len(statuses)} statuses of the send, expected 3"]
    for body in reversed(statuses):  # out of order, as Meta may deliver them
        if h.deliver(body).status_code != 200:
            failures.append("a status webhook was not answered 200")
    action.refresh_from_db()
    if action.delivery_state != "SENT":
        failures.append(
            f"the statuses carrying the reply key left the send {action.delivery_state}, expected SENT"
        )
    settled = list(
        ReplyTransition.objects.filter(action=action, next_state="SENT").values_list("actor", flat=True)
    )
    if action.delivery_state == "SENT" and settled != ["system:status"]:
        failures.append(f"settled by {settled}, expected once by system:status")
    if h.applied() != {action.reply_key: 1}:
        failures.append(
            f"the simulator applied {h.applied()}, expected exactly one message under the reply key"
        )
    return failures
