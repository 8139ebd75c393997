"""Seed 000's acceptance checks and their positive controls, as code an operator can run.

Each check returns a list of failures (empty: the row holds). Each positive
control plants one fault for its own duration and runs the check it guards,
which must then report failure: a check that stays green with its guard
broken has failed as an instrument. The test suite (`tests/acceptance/`) and
`manage.py acceptance` run the same functions. The faults, patches and test
client they act through are reconcile.proof.testkit's, the one seam to test-only machinery.
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

from django.conf import settings
from django.utils import timezone as dj_timezone

from conduit.providers.registry import get_adapter
from conduit.providers.sandbox.simulator import serve
from ingress.models import Delivery, EventTransition, InboundEvent, QuarantineReceipt
from ingress.services import event_transition, source_register
from reconcile.proof import testkit
from reconcile.proof.testkit import (
    approval_check_bypassed,
    canary_aimed_at_live_transport,
    meta_signature_bypassed,
    meta_throttling_taken_as_ambiguous,
    meta_timeout_taken_as_not_sent,
    reconcile_minting_reply_keys,
    without_event_uniqueness,
)
from reconcile.scan import scan_until_done
from replies.contract import reply_key
from replies.models import ReplyAction, SendAttempt

FIXTURES = Path(settings.BASE_DIR) / "fixtures" / "sandbox_social"
NORTHSTAR_KEY = "sandbox-social:acct_test_01:comment.created:evt_test_0042"
PURPOSES = ("public_ack", "private_delivery")
IDENTITY_FIXTURES = {
    "type": "comment__missing_type",
    "post_id": "comment__missing_post_id",
    "comment_id": "comment__missing_comment_id",
    "from_id": "comment__missing_from_id",
    "created_at": "comment__missing_created_at",
    "account": "comment__missing_account",
}


def fixture_body(name: str) -> bytes:
    return (FIXTURES / f"{name}.json").read_bytes()


class Harness:
    """What the checks act through: a source on a loopback sandbox provider and a signed deliverer.

    The signing secret is made for this harness only and lives in the
    environment variable the source names, as a real one would.
    """

    def __init__(self, *, name: str = "sandbox", account_ref: str = "acct_test_01",
                 secret_env: str = "CONDUIT_SOURCE_ACCEPTANCE_SECRET", hang_seconds: float = 2.0) -> None:
        self.secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
        self._restore_secret = testkit.environ_set(secret_env, self.secret)
        self.server, self.state = serve(port=0, hang_seconds=hang_seconds)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.source, _ = source_register(
            name=name, adapter="sandbox-social", account_ref=account_ref, event_types=["comment.created"],
            purposes=list(PURPOSES), trigger_keywords=["CHECKLIST"], secret_env=secret_env,
            source_url=self.url,
        )
        from replies.services import reply_copy_create, reply_route_declare

        for purpose in PURPOSES:
            reply_route_declare(source_id=self.source.pk, purpose=purpose, transport_name="sandbox",
                                target_url=self.url)
            reply_copy_create(source_id=self.source.pk, purpose=purpose, channel=purpose,
                              text="Synthetic copy for the acceptance checks.", actor="system:acceptance")
        self.client = testkit.test_client()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._restore_secret()

    def sign(self, body: bytes, *, delivery_id: str | None = None, secret: str | None = None) -> dict[str, str]:
        return get_adapter("sandbox-social").sign(
            body=body, secret=secret or self.secret, delivery_id=delivery_id or f"msg_test_{uuid.uuid4().hex}",
            at=datetime.now(timezone.utc),
        )

    def deliver(self, body: bytes, *, headers: dict | None = None, **sign_kw):
        return self.client.post(
            f"/webhooks/{self.source.name}/", data=body, content_type="application/json",
            headers=self.sign(body, **sign_kw) if headers is None else headers,
        )

    def fail_next(self, mode: str, count: int = 1) -> None:
        self.state.fail_next(mode, count)

    def provider_calls(self) -> int:
        return self.state.applied_count()

    def planned(self) -> ReplyAction:
        """Deliver the Northstar fixture; its public_ack action, REVIEW_PENDING."""
        self.deliver(fixture_body("comment__northstar"))
        return ReplyAction.objects.get(event_id=NORTHSTAR_KEY, purpose="public_ack")

    def scan(self):
        return scan_until_done(source=self.source, trigger="command", actor="system:acceptance")


# -- the checks, in the order of seed 000's acceptance table ----------------

def event_identity(h: Harness) -> list[str]:
    """Two deliveries of the same fixture leave exactly one event row and seen_count of two.

    Run for the Northstar fixture (which plans replies) and for a fixture whose
    trigger does not match (where the event key is the only guard).
    """
    failures = []
    for fixture, key in (
        ("comment__northstar", NORTHSTAR_KEY),
        ("comment__no_trigger", "sandbox-social:acct_test_01:comment.created:evt_test_0043"),
    ):
        body = fixture_body(fixture)
        statuses = [h.deliver(body).status_code, h.deliver(body).status_code]
        if statuses != [200, 200]:
            failures.append(f"{fixture}: deliveries answered {statuses}, expected [200, 200]")
        rows = list(InboundEvent.objects.filter(event_key=key))
        if len(rows) != 1:
            failures.append(f"{fixture}: expected exactly one event row, found {len(rows)}")
        elif rows[0].seen_count != 2:
            failures.append(f"{fixture}: expected seen_count 2, found {rows[0].seen_count}")
    return failures


def reply_identity(h: Harness) -> list[str]:
    """Reprocessing leaves exactly one row for each declared reply_key."""
    body = fixture_body("comment__northstar")
    h.deliver(body, delivery_id="msg_test_reprocess")
    h.deliver(body, delivery_id="msg_test_reprocess")
    h.deliver(body)
    failures = []
    for purpose in PURPOSES:
        expected = reply_key(NORTHSTAR_KEY, purpose)
        keys = list(ReplyAction.objects.filter(event_id=NORTHSTAR_KEY, purpose=purpose)
                    .values_list("reply_key", flat=True))
        if keys != [expected]:
            failures.append(f"{purpose}: expected one row keyed {expected[:12]}…, found {len(keys)} {keys}")
    return failures


def source_proof(h: Harness) -> list[str]:
    """A fixture with invalid proof enters QUARANTINED and creates zero reply actions."""
    body = fixture_body("comment__northstar")
    headers = h.sign(body)
    headers["webhook-signature"] = h.sign(
        body, secret="whsec_" + base64.b64encode(b"forged-signer-key-000000000000").decode())["webhook-signature"]
    response = h.deliver(body, headers=headers)
    failures = []
    if response.status_code != 401:
        failures.append(f"invalid proof answered {response.status_code}, expected 401")
    if not QuarantineReceipt.objects.filter(reason_code="invalid_signature", state="QUARANTINED").exists():
        failures.append("no QUARANTINED receipt for the invalid proof")
    if ReplyAction.objects.exists() or InboundEvent.objects.exists():
        failures.append("invalid proof created an event or reply actions")
    return failures


def required_fields(h: Harness) -> list[str]:
    """Removing each stable identity field in turn quarantines the receipt, zero reply actions."""
    failures = []
    for name, fixture in IDENTITY_FIXTURES.items():
        before = QuarantineReceipt.objects.count()
        response = h.deliver(fixture_body(fixture))
        if response.status_code != 202:
            failures.append(f"without {name}: answered {response.status_code}, expected 202")
        if QuarantineReceipt.objects.filter(state="QUARANTINED").count() != before + 1:
            failures.append(f"without {name}: no QUARANTINED receipt")
    if InboundEvent.objects.exists() or ReplyAction.objects.exists():
        failures.append("input without stable identity created events or reply actions")
    return failures


def _everything_that_sends(action_id: int) -> None:
    """What could ever send: the queue's task (redelivered), the schedule's picks, the sweeper
    (with no lease left) and a drain worker."""
    from replies import tasks
    from replies.sender import due_action_ids, reply_send_next

    tasks.send_reply(action_id)
    for due in due_action_ids():
        tasks.send_reply(due)
    with testkit.send_leases_expired():
        tasks.sweep_sending()
    tasks.send_reply(action_id)
    while reply_send_next():
        pass


def approval_gate(h: Harness) -> list[str]:
    """An action in REVIEW_PENDING produces zero transport calls."""
    action = h.planned()
    _everything_that_sends(action.pk)
    action.refresh_from_db()
    failures = []
    if h.provider_calls():
        failures.append(f"an unapproved action reached the transport {h.provider_calls()} time(s)")
    if action.delivery_state != "REVIEW_PENDING":
        failures.append(f"an unapproved action moved to {action.delivery_state}")
    return failures


def _approve(action: ReplyAction) -> None:
    from replies.services import reply_approve

    with testkit.nothing_queued():
        result = reply_approve(action_id=action.pk, actor="reviewer_test")
    if not result.ok:
        raise RuntimeError(result.message)


def safe_retry(h: Harness) -> list[str]:
    """A failure before transport retries under the same keys."""
    from replies.sender import reply_send

    action = h.planned()
    _approve(action)
    h.fail_next("refuse")
    first = reply_send(action_id=action.pk)
    ReplyAction.objects.filter(pk=action.pk).update(next_attempt_at=dj_timezone.now() - timedelta(seconds=1))
    second = reply_send(action_id=action.pk)
    failures = []
    if (first, second) != ("FAILED_BEFORE_SEND", "SENT"):
        failures.append(f"expected FAILED_BEFORE_SEND then SENT, got {first} then {second}")
    numbers = list(SendAttempt.objects.filter(action=action).values_list("attempt_number", flat=True))
    if numbers != [1, 2]:
        failures.append(f"expected attempts 1 and 2 on one action, found {numbers}")
    with h.state.lock:
        if h.state.applied != {action.reply_key: 1}:
            failures.append(f"the provider applied {h.state.applied}, expected once under {action.reply_key[:12]}…")
    if ReplyAction.objects.filter(event=action.event, purpose=action.purpose).count() != 1:
        failures.append("the retry created another action")
    return failures


def _parked_not_retried(action: ReplyAction, reached: str) -> list[str]:
    """What an ambiguous send must leave: SEND_STATUS_UNKNOWN after one attempt, nothing retried."""
    action.refresh_from_db()
    failures = []
    if reached != "SEND_STATUS_UNKNOWN" or action.delivery_state != "SEND_STATUS_UNKNOWN":
        failures.append(f"expected SEND_STATUS_UNKNOWN, reached {reached} and ended {action.delivery_state}")
    attempts = SendAttempt.objects.filter(action=action).count()
    if attempts != 1:
        failures.append(f"{attempts} transport attempts, expected 1: the ambiguous send was retried")
    return failures


def ambiguous_send(h: Harness) -> list[str]:
    """A simulated lost receipt enters SEND_STATUS_UNKNOWN and produces no automatic retry."""
    from replies.sender import reply_send

    action = h.planned()
    _approve(action)
    h.fail_next("error_after_accept")
    reached = reply_send(action_id=action.pk)
    _everything_that_sends(action.pk)
    failures = _parked_not_retried(action, reached)
    if h.provider_calls() != 1:
        failures.append(f"the provider applied it {h.provider_calls()} times, expected once")
    return failures


def reconciliation(h: Harness) -> list[str]:
    """A missing local event re-enters through normal ingest and creates no duplicate action.

    The provider holds the Northstar event and a second one whose webhook never
    came. After a complete scan (and again after a second one) each event has
    exactly one row and each declared purpose exactly one action, keyed as
    derived here independently, held at review; nothing reached the transport.
    """
    northstar = json.loads(fixture_body("comment__northstar"))["events"][0]
    missed = {**northstar, "id": "evt_test_0044", "comment_id": "msg_test_0044",
              "created_at": "2026-01-15T14:35:00Z"}
    h.state.hold(h.source.account_ref, [northstar, missed])
    h.deliver(fixture_body("comment__northstar"))
    missed_key = "sandbox-social:acct_test_01:comment.created:evt_test_0044"
    failures = []
    for attempt in ("first", "second"):
        outcome = h.scan()
        if outcome.state != "published":
            return failures + [f"{attempt} scan ended {outcome.state}, expected published"]
        for key in (NORTHSTAR_KEY, missed_key):
            rows = InboundEvent.objects.filter(event_key=key).count()
            if rows != 1:
                failures.append(f"{attempt} scan: {rows} rows for {key}, expected 1")
            for purpose in PURPOSES:
                keys = list(ReplyAction.objects.filter(event_id=key, purpose=purpose)
                            .values_list("reply_key", flat=True))
                if keys != [reply_key(key, purpose)]:
                    failures.append(f"{attempt} scan: {purpose} of {key[-12:]} has keys {keys}, "
                                    f"expected only {reply_key(key, purpose)[:12]}…")
        total = ReplyAction.objects.count()
        if total != 2 * len(PURPOSES):
            failures.append(f"{attempt} scan: {total} reply actions, expected {2 * len(PURPOSES)}")
    recovered = InboundEvent.objects.filter(event_key=missed_key).first()
    if recovered is None:
        return failures + ["the missing event was not recovered"]
    if recovered.reconcile_status != "MATCHED":
        failures.append(f"the recovered event is {recovered.reconcile_status}, expected MATCHED")
    states = set(ReplyAction.objects.filter(event=recovered).values_list("delivery_state", flat=True))
    if states != {"REVIEW_PENDING"}:
        failures.append(f"the recovered event's replies are {states}, expected held at REVIEW_PENDING")
    if not any(missed_key in d.event_keys for d in Delivery.objects.filter(delivery_id__startswith="reconcile:")):
        failures.append("the missing event did not come through the ingest path (no delivery row)")
    if h.provider_calls():
        failures.append(f"reconciliation sent replies: {h.state.applied}")
    return failures


def canary() -> list[str]:
    """Two canary deliveries produce the exact expected rows and zero external calls.

    Runs `manage.py canary`'s own function; needs the reserved account free or
    owned by the canary source. Every failed expectation is a failure.
    """
    from reconcile.proof.canary import CanaryRefused, canary_run

    try:
        result = canary_run(actor="system:acceptance")
    except CanaryRefused as exc:
        return [f"the canary refused to run: {exc}"]
    return [f"{e.name}: expected {e.expected}, found {e.found}" for e in result.expectations if not e.ok]


def state_model(h: Harness) -> list[str]:
    """An undeclared transition is rejected and recorded in its owning ledger."""
    h.deliver(fixture_body("comment__no_trigger"))
    event = InboundEvent.objects.get(source_event_id="evt_test_0043")
    outcome = event_transition(event_id=event.pk, to="RECEIVED", actor="acceptance", reason_code="undeclared_probe")
    event.refresh_from_db()
    failures = []
    if outcome.applied or event.event_state != "CLOSED_NO_REPLY":
        failures.append(f"undeclared move applied: event is {event.event_state}")
    if not EventTransition.objects.filter(
        event=event, refused=True, prior_state="CLOSED_NO_REPLY", next_state="RECEIVED"
    ).exists():
        failures.append("the refusal is not recorded in the event ledger")
    return failures


def _boundary_traffic(h: Harness, buyer: str) -> None:
    """Everything that could leak: ingest, quarantine, approval, send, an unknown send and its
    resolution, reconciliation with a recovered event, and the canary."""
    from replies.sender import reply_send
    from replies.services import unknown_authorize_retry

    def event(n: int, text: str) -> dict:
        return {"id": f"evt_test_b{n}", "type": "comment.created", "post_id": "post_test_b",
                "comment_id": f"msg_test_b{n}", "from_id": "person_test_b",
                "created_at": f"2026-01-15T10:0{n}:00Z", "text": text}

    events = [event(1, buyer), event(2, buyer), event(3, buyer)]
    body = json.dumps({"account": h.source.account_ref, "events": events[:2]}).encode()
    h.deliver(body)
    h.deliver(body)
    forged = h.sign(body, secret="whsec_" + base64.b64encode(b"forged-boundary-key-00000000000").decode())
    h.deliver(body, headers=forged)  # bad proof: quarantined
    h.deliver(json.dumps({"account": h.source.account_ref, "events": [{**events[0], "id": "evt_test_b1",
                                                                        "text": buyer + " changed"}]}).encode())
    actions = list(ReplyAction.objects.filter(event__source=h.source).order_by("id"))
    for action in actions:
        _approve(action)
    reply_send(action_id=actions[0].pk)
    h.fail_next("error_after_accept")
    reply_send(action_id=actions[1].pk)
    unknown_authorize_retry(action_id=actions[1].pk, actor="operator_test")
    h.state.hold(h.source.account_ref, events)  # the third one's webhook never came
    h.scan()
    canary()


def data_boundary() -> list[str]:
    """Logs and reports contain no credential, real buyer payload, or actual field value.

    Plants a known secret in the source's environment variable and buyer-like
    text in the payload, runs everything that handles them, and searches every
    log line, report, API response and admin page. The text may appear only on
    the reply page that shows retained content, to staff holding
    `ingress.view_message_content`; the secret nowhere.
    """
    from django.contrib.auth.models import Permission, User
    from rest_framework.authtoken.models import Token

    buyer = f"CHECKLIST for Jordan Example at 12 Example Lane, phone 555-0100 ref {uuid.uuid4().hex[:8]}"
    h = Harness(name="boundary", account_ref="acct_test_03", secret_env="CONDUIT_SOURCE_BOUNDARY_SECRET")
    secret = h.secret
    try:
        with testkit.captured_logs() as (buffer, console):
            _boundary_traffic(h, buyer)
    finally:
        h.close()
    found: list[str] = []
    if not console:
        found.append("no console log handler to search")

    def search(where: str, text: str, *, buyer_allowed: bool = False) -> None:
        if secret in text:
            found.append(f"the planted secret appears in {where}")
        if buyer in text and not buyer_allowed:
            found.append(f"the buyer text appears in {where}")

    search("the log output", buffer.getvalue())
    from reconcile.models import CanaryReport, ReconcileReport
    from reconcile.selectors import report_json_chunks

    for report in ReconcileReport.objects.all():
        search(f"reconcile report {report.pk}", "".join(report_json_chunks(report)))
    for report in CanaryReport.objects.all():
        search(f"canary report {report.pk}", json.dumps([report.summary, report.expectations]))

    # A token acts with its user's permissions: every view permission but the content one.
    api_user = User.objects.create_user("api_test_boundary")
    api_user.user_permissions.set(Permission.objects.filter(codename__startswith="view_")
                                  .exclude(codename="view_message_content"))
    token = Token.objects.create(user=api_user).key
    api = testkit.test_client(raise_errors=True, HTTP_AUTHORIZATION=f"Token {token}")
    for url in ("/api/events/", "/api/quarantine/", "/api/schema/"):
        response = api.get(url)
        if response.status_code != 200:
            found.append(f"GET {url} answered {response.status_code}: the search would be blind")
        search(f"GET {url}", response.content.decode())
    from reconcile.selectors import reply_decision_request

    for action in ReplyAction.objects.all():
        response = api.post("/api/decisions/", data=reply_decision_request(action), content_type="application/json")
        search("POST /api/decisions/", response.content.decode())

    staff = User.objects.create_user("staff_test_boundary", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(codename__startswith="view_")
                               .exclude(codename="view_message_content"))
    owner = User.objects.create_superuser("owner_test_boundary", "owner@example.invalid", None)
    shown_to_owner = []
    for user in (staff, owner):
        client = testkit.test_client(raise_errors=True)
        client.force_login(user)
        for url in _admin_pages():
            response = client.get(url)
            page = (b"".join(response.streaming_content) if response.streaming else response.content).decode()
            if user is owner and buyer in page:
                shown_to_owner.append(url)
            search(f"{url} (as {user.username})", page, buyer_allowed=user is owner)
    bad = [url for url in shown_to_owner if not url.startswith("/admin/replies/")]
    if bad:
        found.append(f"the buyer text is shown beyond the reply pages: {bad}")
    if not shown_to_owner:
        found.append("the buyer text is not shown even to staff with the permission (the search is blind)")
    return found


def _admin_pages() -> list[str]:
    """Every admin index, changelist and change page of every registered model (three rows each),
    and the report pages and exports."""
    from django.contrib import admin
    from django.urls import NoReverseMatch, reverse

    from reconcile.models import CanaryReport, ReconcileReport

    urls = ["/admin/"]
    for model in admin.site._registry:
        meta = model._meta
        urls.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
        for pk in model._default_manager.order_by("-pk").values_list("pk", flat=True)[:3]:
            urls.append(reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[pk]))
    for model in (ReconcileReport, CanaryReport):
        for pk in model.objects.values_list("pk", flat=True):
            try:
                urls.append(reverse(f"admin:reconcile_{model._meta.model_name}_export", args=[pk]))
            except NoReverseMatch:
                pass
    return urls


# -- Meta: the same promises through Meta's proof, field maps and Graph read-back --------

META_APP_ID = "900000000000001"
META_ACCOUNT = "17841400000000001"
META_MEDIA = "18000000000000001"
META_BUYER = "17841400000000901"
META_ROUTES = {"public_ack": "meta-comment-reply", "private_delivery": "meta-private-reply"}
# How long the simulator holds a timed-out answer, and the transport's timeout in the row that
# times out: the answer never comes within the timeout, and the check stays short.
META_HANG_SECONDS = 3.0
META_TIMEOUT_SECONDS = 1.0


class MetaHarness:
    """An Instagram source of a synthetic Meta app, read back from the loopback Graph simulator.

    Its app secret, verify token and access token are made for this harness only
    and live in the variables the source names, as real ones would.
    """

    def __init__(self) -> None:
        from conduit.providers.meta.simulator import serve as graph_serve
        from ingress.models import Source
        from replies.services import reply_copy_create, reply_route_declare

        self.secret = secrets.token_hex(16)
        self._restore = [testkit.environ_set(name, value) for name, value in (
            ("CONDUIT_SOURCE_ACCEPTANCE_META_SECRET", self.secret),
            ("CONDUIT_SOURCE_ACCEPTANCE_META_VERIFY", secrets.token_hex(8)),
            ("CONDUIT_SOURCE_ACCEPTANCE_META_TOKEN", secrets.token_hex(16)),
        )]
        # A timeout fault holds the answer this long: past the transport's timeout in the ambiguous row.
        self.graph = graph_serve(port=0, hang_seconds=META_HANG_SECONDS)
        self._sim("/_sim/accounts", {"id": META_ACCOUNT, "object": "instagram", "app_id": META_APP_ID})
        self.source, _ = source_register(
            name="meta-acceptance", adapter="meta-instagram", account_ref=META_ACCOUNT,
            event_types=["comment.created"], purposes=list(PURPOSES), trigger_keywords=["CHECKLIST"],
            secret_env="CONDUIT_SOURCE_ACCEPTANCE_META_SECRET", meta_app_id=META_APP_ID,
            verify_token_env="CONDUIT_SOURCE_ACCEPTANCE_META_VERIFY", token_env="CONDUIT_SOURCE_ACCEPTANCE_META_TOKEN",
            source_url=self.graph.instagram_url,
        )
        # Connected a day ago: the comments below are new work, not history.
        Source.objects.filter(pk=self.source.pk).update(
            connected_at=dj_timezone.now() - timedelta(days=1))
        self.source.refresh_from_db()
        for purpose, transport in META_ROUTES.items():
            # Meta's own transports at the simulator's Instagram host (loopback: not live).
            reply_route_declare(source_id=self.source.pk, purpose=purpose, transport_name=transport,
                                target_url=self.graph.instagram_url)
            reply_copy_create(source_id=self.source.pk, purpose=purpose, channel=purpose,
                              text="Synthetic copy for the acceptance checks.", actor="system:acceptance")
        self.client = testkit.test_client()

    def close(self) -> None:
        self.graph.close()
        for restore in self._restore:
            restore()

    def _sim(self, path: str, body: dict | None = None, *, method: str = "POST") -> dict:
        return self.graph.control(path, body, method=method)

    def comment(self, text: str) -> str:
        """A comment the platform holds, with no webhook sent (the caller delivers one, or not)."""
        return self._sim("/_sim/comments", {"account": META_ACCOUNT, "media_id": META_MEDIA, "text": text,
                                            "from_id": META_BUYER, "notify": False})["id"]

    @staticmethod
    def body(*comments: tuple[str, str]) -> bytes:
        """Meta's notification of (comment id, text) pairs, in one entry."""
        changes = [{"field": "comments", "value": {
            "id": cid, "text": text, "from": {"id": META_BUYER, "username": "buyer_test"},
            "media": {"id": META_MEDIA, "media_product_type": "FEED"}}} for cid, text in comments]
        return json.dumps({"object": "instagram", "entry": [
            {"id": META_ACCOUNT, "time": int(datetime.now(timezone.utc).timestamp()), "changes": changes}]}).encode()

    def deliver(self, body: bytes, *, secret: str | None = None):
        from conduit.providers.meta.webhook import signature_header

        return self.client.post(
            f"/webhooks/meta/{META_APP_ID}/", data=body, content_type="application/json",
            headers={"X-Hub-Signature-256": signature_header(body=body, secret=secret or self.secret)},
        )

    def key(self, comment_id: str) -> str:
        return f"meta-instagram:{META_ACCOUNT}:comment.created:{comment_id}"

    def planned(self) -> ReplyAction:
        """A comment the platform holds, delivered as Meta notifies it; its public_ack action,
        REVIEW_PENDING, routed to meta-comment-reply at the simulator."""
        comment = self.comment("CHECKLIST please")
        self.deliver(self.body((comment, "CHECKLIST please")))
        return ReplyAction.objects.get(event_id=self.key(comment), purpose="public_ack")

    def fail_next(self, mode: str, **fault: Any) -> None:
        """The simulator's next Graph write fails so (its `/_sim/faults` modes and fields)."""
        self._sim("/_sim/faults", {"mode": mode, "count": 1, "method": "POST", **fault})

    def applied(self) -> dict:
        """What the simulator applied: {"public": {comment_id: n}, "private": {comment_id: n}}."""
        return self._sim("/_sim/applied", method="GET")

    def graph_writes(self) -> int:
        """Graph writes the simulator was asked for (each POST, applied or not)."""
        calls = self._sim("/_sim/calls", method="GET")
        return sum(1 for call in calls["log"] if call["method"] == "POST")

    def scan(self):
        return scan_until_done(source=self.source, trigger="command", actor="system:acceptance")


def meta_source_proof(h: MetaHarness) -> list[str]:
    """A Meta body signed with another secret is 401, quarantined, and plans nothing."""
    body = h.body((h.comment("CHECKLIST please"), "CHECKLIST please"))
    response = h.deliver(body, secret=secrets.token_hex(16))
    failures = []
    if response.status_code != 401:
        failures.append(f"invalid proof answered {response.status_code}, expected 401")
    if not QuarantineReceipt.objects.filter(reason_code="invalid_signature", state="QUARANTINED",
                                            authenticated=False).exists():
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
    statuses = [h.deliver(single).status_code, h.deliver(single).status_code,
                h.deliver(h.body((first, "CHECKLIST please"), (second, "CHECKLIST for two"))).status_code,
                h.deliver(untriggered).status_code, h.deliver(untriggered).status_code]
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
                keys = list(ReplyAction.objects.filter(event_id=key, purpose=purpose)
                            .values_list("reply_key", flat=True))
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
    _everything_that_sends(action.pk)
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
    from replies.models import SendBudget
    from replies.sender import reply_send

    action = h.planned()
    comment = action.event_id.rsplit(":", 1)[1]
    _approve(action)
    h.fail_next("error", code=80002, status=400)
    first = reply_send(action_id=action.pk)
    action.refresh_from_db()
    failures = []
    if first == "FAILED_BEFORE_SEND" and action.next_attempt_at is None:
        failures.append("the throttled send was not scheduled for an automatic retry")
    # The wait Meta's throttling imposes (the action's backoff, the account's pause) has passed.
    ReplyAction.objects.filter(pk=action.pk).update(next_attempt_at=dj_timezone.now() - timedelta(seconds=1))
    SendBudget.objects.filter(source=h.source).update(paused_until=None)
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
    _approve(action)
    h.fail_next("apply_then_timeout")
    with testkit.transport_timeout(META_TIMEOUT_SECONDS):
        reached = reply_send(action_id=action.pk)
        _everything_that_sends(action.pk)
    failures = _parked_not_retried(action, reached)
    if h.graph_writes() != 1:
        failures.append(f"{h.graph_writes()} Graph writes, expected 1")
    applied = h.applied()
    if applied != {"public": {comment: 1}, "private": {}}:
        failures.append(f"the simulator applied {applied}, expected exactly one public reply to {comment}")
    return failures


# -- the table and its controls: (row, the fault, a context manager planting it) ----

@dataclass(frozen=True)
class Row:
    name: str
    evidence: str
    check: Callable[..., list[str]]
    # What the check acts through (built per run and closed after), or None.
    harness: Callable[[], Any] | None = Harness

    @property
    def needs_harness(self) -> bool:
        return self.harness is not None


@dataclass(frozen=True)
class Control:
    row: str
    fault: str
    plant: Callable[[], contextlib.AbstractContextManager]


ROWS = [
    Row("Event identity", "Two deliveries of the same fixture leave exactly one event row and seen_count of two",
        event_identity),
    Row("Reply identity", "Reprocessing leaves exactly one row for each declared reply_key", reply_identity),
    Row("Source proof", "A fixture with invalid proof enters QUARANTINED and creates zero reply actions",
        source_proof),
    Row("Required fields", "Removing one stable identity field routes the receipt to QUARANTINED and creates "
        "zero reply actions", required_fields),
    Row("Approval gate", "An action in REVIEW_PENDING produces zero transport calls", approval_gate),
    Row("Safe retry", "A failure before transport retries under the same keys", safe_retry),
    Row("Ambiguous send", "A simulated lost receipt enters SEND_STATUS_UNKNOWN and produces no automatic retry",
        ambiguous_send),
    Row("Reconciliation", "A missing local event re-enters through normal ingest and creates no duplicate action",
        reconciliation),
    Row("Canary", "Two canary deliveries produce the exact expected rows and zero external calls", canary,
        harness=None),
    Row("State model", "An undeclared transition is rejected and recorded in its owning ledger", state_model),
    Row("Data boundary", "Logs and reports contain no credential, real buyer payload, or actual field value",
        data_boundary, harness=None),
    # The same promises for Meta's platforms, through Meta's proof, field maps and Graph read-back.
    Row("Meta source proof", "A Meta body with an invalid X-Hub-Signature-256 enters QUARANTINED and creates "
        "zero reply actions", meta_source_proof, harness=MetaHarness),
    Row("Meta event identity", "The same Meta body twice, and a retry batched differently, leave one event row "
        "per comment", meta_event_identity, harness=MetaHarness),
    Row("Meta reconciliation", "A comment whose webhook never came is recovered from the Graph API with one "
        "action per purpose, no identity conflict and no call off this host", meta_reconciliation,
        harness=MetaHarness),
    Row("Meta approval gate", "An action in REVIEW_PENDING produces zero Graph writes through the Meta transports",
        meta_approval_gate, harness=MetaHarness),
    Row("Meta safe retry", "Meta's throttling answer (not applied) then a success leaves one reply at the "
        "simulator under the same reply key", meta_safe_retry, harness=MetaHarness),
    Row("Meta ambiguous send", "A reply the simulator applied without answering (apply_then_timeout) enters "
        "SEND_STATUS_UNKNOWN, is never retried automatically, and is applied exactly once",
        meta_ambiguous_send, harness=MetaHarness),
]
# Instrument integrity: seed 000's four named controls.
CONTROLS = [
    Control("Event identity", "the event uniqueness rule disabled", without_event_uniqueness),
    Control("Reconciliation", "reconciliation changed to mint a new reply key", reconcile_minting_reply_keys),
    Control("Canary", "the canary action pointed at a live transport", canary_aimed_at_live_transport),
    Control("Approval gate", "the approval check bypassed", approval_check_bypassed),
    Control("Meta source proof", "Meta's signature check bypassed", meta_signature_bypassed),
    Control("Meta event identity", "the event uniqueness rule disabled", without_event_uniqueness),
    Control("Meta reconciliation", "reconciliation changed to mint a new reply key", reconcile_minting_reply_keys),
    Control("Meta approval gate", "the approval check bypassed", approval_check_bypassed),
    Control("Meta safe retry", "Meta's throttling answer taken as ambiguous", meta_throttling_taken_as_ambiguous),
    Control("Meta ambiguous send", "a timeout after the request taken as not sent", meta_timeout_taken_as_not_sent),
]


def row(name: str) -> Row:
    return next(r for r in ROWS if r.name == name)
