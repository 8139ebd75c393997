"""The soak's checks on doctored data: each passes on a consistent state and fails on its fault."""

from __future__ import annotations

from collections import Counter

from tests.soak import checks as c

PURPOSES = ["public_ack", "private_delivery"]


def _state():
    """Two deliveries: d1 (two events, acked once, sent twice: a dropped response then a 200, both
    recorded) and d2 (one untriggered event, acked twice); all replies SENT and applied once."""
    sent = [
        c.SentDelivery("d1", ["e1", "e2"], attempts=2, acks=1, event_keys={"e1": "k1", "e2": "k2"}),
        c.SentDelivery("d2", ["e3"], attempts=2, acks=2, event_keys={"e3": "k3"}),
    ]
    events = [
        c.StoredEvent("k1", "e1", 2, True),
        c.StoredEvent("k2", "e2", 2, True),
        c.StoredEvent("k3", "e3", 2, False),
    ]
    deliveries = [c.StoredDelivery("d1", 2, ["k1", "k2"]), c.StoredDelivery("d2", 2, ["k3"])]
    actions = [c.StoredAction(f"r{k}{p}", k, p, "SENT", "APPROVED") for k in ("k1", "k2") for p in PURPOSES]
    applied = {a.reply_key: 1 for a in actions}
    return sent, events, deliveries, actions, applied


def test_a_consistent_state_passes_every_check():
    sent, events, deliveries, actions, applied = _state()
    assert c.check_acked_events_present_once(sent, events).ok
    assert c.check_nothing_lost(sent, events).ok
    assert c.check_seen_count(sent, events, deliveries).ok
    assert c.check_replies_planned_once(events, actions, PURPOSES).ok
    assert c.check_approved_finished(actions).ok
    assert c.check_applied_at_most_once(actions, applied).ok
    assert c.check_answers(Counter({200: 3, 503: 1})).ok


def test_an_acknowledged_event_missing_or_under_another_key_fails():
    sent, events, *_ = _state()
    assert not c.check_acked_events_present_once(sent, events[1:]).ok
    assert not c.check_acked_events_present_once(sent, [c.StoredEvent("kX", "e1", 2, True), *events[1:]]).ok
    assert not c.check_acked_events_present_once(sent, [*events, c.StoredEvent("k1b", "e1", 1, True)]).ok


def test_a_lost_event_an_invented_one_or_an_unacknowledged_delivery_fails():
    sent, events, *_ = _state()
    assert not c.check_nothing_lost(sent, events[:-1]).ok
    assert not c.check_nothing_lost(sent, [*events, c.StoredEvent("k9", "e9", 1, False)]).ok
    sent[1].acks = 0
    assert not c.check_nothing_lost(sent, events).ok


def test_seen_count_off_the_receipts_fails():
    """A seen_count that differs from its delivery rows' receipts, below the 200s read or above the
    requests sent, each fails."""
    sent, events, deliveries, *_ = _state()
    events[0].seen_count = 3  # more than d1 recorded, and more than d1 was sent
    assert not c.check_seen_count(sent, events, deliveries).ok
    sent, events, deliveries, *_ = _state()
    events[2].seen_count = deliveries[1].seen_count = 1  # consistent rows, but d2 had two 200s
    assert not c.check_seen_count(sent, events, deliveries).ok
    sent, events, deliveries, *_ = _state()
    sent[0].attempts = 1  # the server recorded two receipts of a delivery sent once
    assert not c.check_seen_count(sent, events, deliveries).ok


def test_a_missing_or_doubled_plan_fails():
    _, events, _, actions, _ = _state()
    assert not c.check_replies_planned_once(events, actions[1:], PURPOSES).ok
    assert not c.check_replies_planned_once(
        events, [*actions, c.StoredAction("rk3public_ack", "k3", "public_ack", "SENT", "APPROVED")], PURPOSES
    ).ok


def test_an_unapproved_or_unfinished_reply_fails():
    _, _, _, actions, _ = _state()
    actions[0].delivery_state = "APPROVED"
    assert not c.check_approved_finished(actions).ok
    _, _, _, actions, _ = _state()
    actions[0].approval_state, actions[0].delivery_state = "PENDING", "REVIEW_PENDING"
    assert not c.check_approved_finished(actions).ok
    actions[0].approval_state, actions[0].delivery_state = "APPROVED", "SEND_STATUS_UNKNOWN"
    assert c.check_approved_finished(actions).ok


def test_a_reply_applied_twice_or_a_sent_one_never_applied_fails():
    _, _, _, actions, applied = _state()
    applied[actions[0].reply_key] = 2
    assert not c.check_applied_at_most_once(actions, applied).ok
    _, _, _, actions, applied = _state()
    del applied[actions[0].reply_key]
    assert not c.check_applied_at_most_once(actions, applied).ok
    _, _, _, actions, applied = _state()
    applied["r-not-conduits"] = 1
    assert not c.check_applied_at_most_once(actions, applied).ok


def test_an_answer_other_than_200_or_503_fails():
    assert not c.check_answers(Counter({200: 3, 202: 1})).ok
    assert not c.check_answers(Counter({200: 3, 500: 1})).ok
    assert not c.check_answers(Counter()).ok
