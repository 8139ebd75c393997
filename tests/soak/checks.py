"""The soak's checks: pure functions over what the clients saw and what the stores hold."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

FINISHED = ("SENT", "SEND_STATUS_UNKNOWN")


@dataclass
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'} {self.name}: {self.detail}"


@dataclass
class SentDelivery:
    """One delivery as its client saw it.

    `attempts` counts every request begun with it (a dropped response, one cut by a killed node,
    a 503 and the 200s alike): the most receipts the server can have recorded. `acks` counts
    the 200s the client read: the fewest.
    """

    delivery_id: str
    event_ids: list[str]
    attempts: int = 0
    acks: int = 0
    event_keys: dict[str, str] = field(default_factory=dict)  # event id -> key named by a 200
    body: bytes = field(default=b"", repr=False)


@dataclass
class StoredEvent:
    event_key: str
    source_event_id: str
    seen_count: int
    trigger_match: bool


@dataclass
class StoredDelivery:
    delivery_id: str
    seen_count: int
    event_keys: list[str]


@dataclass
class StoredAction:
    reply_key: str
    event_key: str
    purpose: str
    delivery_state: str
    approval_state: str


def _some(items, limit: int = 3) -> str:
    items = sorted(items)
    more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
    return ", ".join(map(str, items[:limit])) + more


def check_acked_events_present_once(sent: list[SentDelivery], events: list[StoredEvent]) -> Check:
    """Every event of a delivery answered 200 is stored exactly once, under the key the 200 named."""
    rows = Counter(e.source_event_id for e in events)
    key_of = {e.source_event_id: e.event_key for e in events}
    acked = {eid: d.event_keys.get(eid) for d in sent if d.acks for eid in d.event_ids}
    missing = [eid for eid in acked if rows[eid] == 0]
    doubled = [eid for eid in acked if rows[eid] > 1]
    wrong_key = [eid for eid, key in acked.items() if rows[eid] == 1 and key_of[eid] != key]
    ok = bool(acked) and not (missing or doubled or wrong_key)
    detail = (
        f"{len(acked)} acknowledged events, {len(missing)} missing, {len(doubled)} stored twice, "
        f"{len(wrong_key)} under another key"
    )
    if missing or doubled or wrong_key:
        detail += f" (e.g. {_some(missing + doubled + wrong_key)})"
    return Check("every acknowledged event present once", ok, detail)


def check_nothing_lost(sent: list[SentDelivery], events: list[StoredEvent]) -> Check:
    """Every delivery was acknowledged in the end (clients retry until a 200), and the database
    holds exactly the events the clients sent: none lost, none made up."""
    sent_ids = {eid for d in sent for eid in d.event_ids}
    stored_ids = {e.source_event_id for e in events}
    unacked = [d.delivery_id for d in sent if not d.acks]
    lost = sent_ids - stored_ids
    extra = stored_ids - sent_ids
    ok = bool(sent) and not (unacked or lost or extra)
    detail = (
        f"{len(sent)} deliveries, {len(unacked)} never acknowledged; {len(sent_ids)} events sent, "
        f"{len(stored_ids)} stored, {len(lost)} lost, {len(extra)} not sent by a client"
    )
    if unacked or lost or extra:
        detail += f" (e.g. {_some(unacked + sorted(lost) + sorted(extra))})"
    return Check("nothing lost", ok, detail)


def check_seen_count(
    sent: list[SentDelivery], events: list[StoredEvent], deliveries: list[StoredDelivery]
) -> Check:
    """seen_count equals the receipts the server recorded, and those lie between what the clients saw.

    The server's own count is exact: each accepted receipt adds one to its delivery row and to each
    of its events in one transaction, so an event's seen_count must equal the sum of the seen_count
    of the delivery rows listing it (each event is sent in one delivery only). What the clients know
    brackets it: at least the 200s they read (each is a committed receipt), at most the requests they
    began (a dropped response, or a request cut by a killed node, may have committed without the
    client seeing the 200; it may also have died before the commit). Checked per delivery and per event.
    """
    by_key = {e.event_key: e for e in events}
    stored_delivery = {d.delivery_id: d for d in deliveries}
    from_deliveries: Counter[str] = Counter()
    for d in deliveries:
        for key in d.event_keys:
            from_deliveries[key] += d.seen_count
    bad_sum = [e.event_key for e in events if e.seen_count != from_deliveries[e.event_key]]
    attempts: Counter[str] = Counter()
    acks: Counter[str] = Counter()
    out_of_bounds_delivery = []
    for d in sent:
        stored = stored_delivery.get(d.delivery_id)
        recorded = stored.seen_count if stored else 0
        if not d.acks <= recorded <= d.attempts:
            out_of_bounds_delivery.append(
                f"{d.delivery_id} acks={d.acks} recorded={recorded} sent={d.attempts}"
            )
        for eid in d.event_ids:
            attempts[eid] += d.attempts
            acks[eid] += d.acks
    by_id = {e.source_event_id: e for e in events}
    out_of_bounds_event = [
        f"{eid} acks={acks[eid]} seen={by_id[eid].seen_count} sent={attempts[eid]}"
        for eid in attempts
        if eid in by_id and not acks[eid] <= by_id[eid].seen_count <= attempts[eid]
    ]
    unseen_commits = sum(by_id[eid].seen_count - acks[eid] for eid in attempts if eid in by_id)
    ok = bool(by_key) and not (bad_sum or out_of_bounds_delivery or out_of_bounds_event)
    detail = (
        f"{len(events)} events: {len(bad_sum)} whose seen_count differs from their delivery rows' "
        f"receipts, {len(out_of_bounds_event)} events and {len(out_of_bounds_delivery)} deliveries "
        f"outside [200s read, requests sent]; {unseen_commits} receipts recorded without the client "
        f"reading the 200"
    )
    if bad_sum or out_of_bounds_delivery or out_of_bounds_event:
        detail += f" (e.g. {_some(bad_sum + out_of_bounds_event + out_of_bounds_delivery)})"
    return Check("seen_count equals receipts", ok, detail)


def check_replies_planned_once(
    events: list[StoredEvent], actions: list[StoredAction], purposes: list[str]
) -> Check:
    """Each triggered event has exactly one action per declared purpose; an untriggered one none."""
    planned = Counter((a.event_key, a.purpose) for a in actions)
    bad = []
    for e in events:
        for purpose in purposes:
            want = 1 if e.trigger_match else 0
            if planned[(e.event_key, purpose)] != want:
                bad.append(f"{e.source_event_id}/{purpose}={planned[(e.event_key, purpose)]}")
    keys = Counter(a.reply_key for a in actions)
    doubled = [k for k, n in keys.items() if n > 1]
    ok = bool(actions) and not (bad or doubled)
    detail = (
        f"{len(actions)} reply actions for {sum(e.trigger_match for e in events)} triggered events, "
        f"{len(bad)} wrong plans, {len(doubled)} reply keys held twice"
    )
    if bad or doubled:
        detail += f" (e.g. {_some(bad + doubled)})"
    return Check("each reply planned once", ok, detail)


def check_approved_finished(actions: list[StoredAction]) -> Check:
    """Every planned reply was approved and ended SENT or SEND_STATUS_UNKNOWN."""
    states = Counter(a.delivery_state for a in actions)
    unapproved = [a.reply_key[:12] for a in actions if a.approval_state != "APPROVED"]
    unfinished = [
        f"{a.reply_key[:12]}={a.delivery_state}" for a in actions if a.delivery_state not in FINISHED
    ]
    ok = bool(actions) and not (unapproved or unfinished)
    detail = (
        ", ".join(f"{s} {n}" for s, n in sorted(states.items()))
        + f"; {len(unapproved)} not approved, {len(unfinished)} not finished"
    )
    if unapproved or unfinished:
        detail += f" (e.g. {_some(unapproved + unfinished)})"
    return Check("every approved reply SENT or SEND_STATUS_UNKNOWN", ok, detail)


def check_applied_at_most_once(actions: list[StoredAction], applied: dict[str, int]) -> Check:
    """The provider (idempotency keys off, so it applies every POST) applied each reply key at most
    once; each SENT one exactly once (its receipt is real); no key Conduit does not hold."""
    known = {a.reply_key: a for a in actions}
    twice = [f"{k[:12]}x{n}" for k, n in applied.items() if n > 1]
    sent_not_applied = [
        a.reply_key[:12] for a in actions if a.delivery_state == "SENT" and applied.get(a.reply_key) != 1
    ]
    stranger = [k[:12] for k in applied if k not in known]
    ok = not (twice or sent_not_applied or stranger)
    detail = (
        f"{len(applied)} keys applied ({sum(applied.values())} applications), {len(twice)} more than once, "
        f"{len(sent_not_applied)} SENT but not applied once, {len(stranger)} unknown to Conduit"
    )
    if not ok:
        detail += f" (e.g. {_some(twice + sent_not_applied + stranger)})"
    return Check("each reply key applied at most once by the provider", ok, detail)


def check_answers(statuses: Counter) -> Check:
    """Every answer a client read was 200 or a retryable 503: nothing quarantined, refused or 500."""
    unexpected = {s: n for s, n in statuses.items() if s not in (200, 503)}
    detail = ", ".join(f"{s}: {n}" for s, n in sorted(statuses.items())) or "no answers"
    return Check("every answer 200 or 503", statuses.get(200, 0) > 0 and not unexpected, detail)
