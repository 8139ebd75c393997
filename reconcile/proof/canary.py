"""The non-delivery canary (docs/concepts/canary.md): the whole path on the signed Northstar fixture.

Each run makes the fixture its own synthetic event (reserved ids minted for the
run, `evt_test_canary_<run id>`, in a second no other event of the source
holds), so every run proves the seed's exact sequence, not only the first:
one event, one row per purpose, seen_count two, one converged duplicate. The
body is signed at run time and posted twice over real HTTP to the real
webhook endpoint; each planned action is approved for the person running it
and taken through the real claim and sender, where the transport guard writes
it to the canary sink; then the run's second of the fixture source is reconciled. Every
expectation is checked against the ledgers and the transport boundary's own
call counter, and the result is kept as a canary report.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import secrets
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterator
from wsgiref.simple_server import WSGIRequestHandler, make_server

from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.db import connections
from django.db.models import Max
from django.utils import timezone as dj_timezone

from conduit.process_secrets import secret_held
from conduit.providers.base import CALLS
from conduit.providers.registry import TRANSPORTS, get_adapter, reads_off_host
from conduit.timefmt import iso_z
from ingress.models import InboundEvent, Source
from ingress.selectors import source_config, source_identity_holder
from ingress.services import SourceConflict, source_connection_clear, source_register
from reconcile.lease import LeaseBusy
from reconcile.models import CanaryReport, ReconcileReport
from reconcile.proof.platforms import CanaryPlatform as Platform
from reconcile.proof.platforms import canary_platform, canary_platform_default, canary_platforms
from reconcile.scan import ScanConflict, scan_until_done
from replies.contract import reply_key
from replies.models import CanarySinkRecord, ReplyAction, ReplyRoute
from replies.models import DeliveryState as S
from replies.sender import reply_send
from replies.services import reply_approve, reply_copy_create, reply_route_declare
from replies.transports import is_live

logger = logging.getLogger("conduit.canary")

COPY = "The sample checklist is ready in the test fixture."
RESERVED_PREFIXES = ("acct_test_", "evt_test_", "post_test_", "msg_test_", "person_test_")


class CanaryRefused(Exception):
    """The canary would not be a non-delivery canary: refused before any network call."""


@dataclass
class Expectation:
    name: str
    expected: object
    found: object

    @property
    def ok(self) -> bool:
        return self.expected == self.found

    def as_dict(self) -> dict:
        return {"name": self.name, "expected": self.expected, "found": self.found, "ok": self.ok}


@dataclass
class CanaryResult:
    report: CanaryReport
    expectations: list[Expectation] = field(default_factory=list)


def _fixture(platform: Platform | None = None) -> tuple[bytes, dict]:
    platform = platform or canary_platform()
    body = platform.fixture.read_bytes()
    return body, json.loads(body)


def run_fixture(platform: Platform, *, run_id: str, at: datetime) -> bytes:
    """The body one run posts: the platform's fixture with the run's own reserved ids and second.

    Each run proves the sequence of docs/concepts/canary.md#run on an event of its own, so every report
    shows the same evidence (one event, seen_count two, one converged duplicate)
    however often the canary has run. The positive control
    (the testkit's canary_ids_fixed) posts the fixture as it is instead.
    """
    _, document = _fixture(platform)
    return json.dumps(platform.for_run(document, run_id=run_id, at=at), indent=2).encode()


def _run_second(source: Source, platform: Platform) -> datetime:
    """The second this run's event occurs in: the fixture's, or the one after the source's latest
    event, so the reconciliation window of one run holds no event of another."""
    _, document = _fixture(platform)
    at = platform.fixture_time(document)
    latest = InboundEvent.objects.filter(source=source).aggregate(at=Max("occurred_at"))["at"]
    if latest is not None:
        at = max(at, latest.replace(microsecond=0) + timedelta(seconds=1))
    return at


def _reserved(document: dict, platform: Platform | None = None) -> list[str]:
    """Identifiers in the fixture that are not reserved synthetic ones."""
    platform = platform or canary_platform()
    return [v for v in platform.identifiers(document) if not str(v).startswith(RESERVED_PREFIXES)]


def canary_source(platform: Platform | None = None) -> Source:
    """The canary source, created if missing; refused unless it is safe to run against.

    Fails closed, before anything touches the network, when the source is
    configured with a route to a live transport, live sending, other
    identifiers, or without the canary flag. Without a platform: the default one's source.
    """
    platform = platform or canary_platform()
    registration = platform.registration
    _, document = _fixture(platform)
    if _reserved(document, platform):
        raise CanaryRefused(
            "the fixture holds identifiers that are not reserved synthetic ones: "
            f"{_reserved(document, platform)}"
        )
    source = Source.objects.filter(name=registration["name"]).first()
    if source is None:
        owner = source_identity_holder(
            adapter=registration["adapter"], account_ref=registration["account_ref"]
        )
        if owner is not None:
            raise CanaryRefused(
                f"the reserved canary account {registration['account_ref']} is registered as source "
                f"{owner.name!r}; the canary needs it as its own source named {registration['name']!r}"
            )
        try:
            source, _ = source_register(**registration)
        except SourceConflict as exc:
            raise CanaryRefused(str(exc)) from None
        # The fixture is fixed (its comment's time is in the past): the canary source proves the
        # path for new work, so no connection time makes its fixture history.
        source_connection_clear(source_id=source.pk)
        source.connected_at = None
        for purpose in source.purposes:
            reply_route_declare(source_id=source.pk, purpose=purpose, transport_name=platform.transport)
            reply_copy_create(
                source_id=source.pk,
                purpose=purpose,
                channel=purpose,
                text=COPY,
                actor="system:canary",
                # Where free-form text has a window (WhatsApp), the run's synthetic event is past it:
                # its copy carries a template, so the run proves the template path.
                template=getattr(platform, "copy_template", None),
            )
    problems = []
    if not source.canary:
        problems.append("the canary flag is off")
    reserved = (get_adapter(registration["adapter"]).source_system, registration["account_ref"])
    if (source.source_system, source.account_ref) != reserved:
        problems.append(
            f"its identifiers are {source.source_system}/{source.account_ref}, "
            f"not the reserved {reserved[0]}/{reserved[1]}"
        )
    if reads_off_host(source.adapter, source.source_url) and source.source_url:
        problems.append("it reads its source off this host")
    routes = list(ReplyRoute.objects.filter(source=source).order_by("purpose"))
    for route in routes:
        if route.transport_name not in TRANSPORTS or is_live(route.transport_name):
            problems.append(
                f"its {route.purpose} replies are routed to the live transport {route.transport_name!r}"
            )
    if any(route.live_send_enabled for route in routes):
        problems.append("live sending is enabled for it")
    if problems:
        raise CanaryRefused("the canary source is unsafe: " + "; ".join(problems))
    return source


class _Handler(WSGIRequestHandler):
    def log_message(self, format: str, *args) -> None:  # the canary prints its own findings
        pass

    def handle(self) -> None:
        try:
            super().handle()
        finally:
            connections.close_all()  # this server thread's own connection ends with the request


def _post(port: int, source: Source, body: bytes, secret: str, platform: Platform) -> int:
    headers = platform.headers(source, body, secret)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST",
            platform.path(source),
            body=body,
            headers={**headers, "Content-Type": "application/json", "Host": "127.0.0.1"},
        )
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


@contextlib.contextmanager
def _signing_secret(source: Source, platform: Platform) -> Iterator[str]:
    """The secret the fixture is signed with: the environment's, or one made for this run only.

    A made one is held by this process for the run (conduit.process_secrets),
    not left in the environment that child processes inherit; so is the access
    token a Meta-shaped canary's read presents to the simulator.
    """
    with contextlib.ExitStack() as stack:
        if source.token_env and not os.environ.get(source.token_env):
            stack.enter_context(secret_held(source.token_env, secrets.token_hex(16)))
        secret = os.environ.get(source.secret_env)
        if not secret:
            secret = platform.new_secret()
            stack.enter_context(secret_held(source.secret_env, secret))
        yield secret


def _reconciliation_expectations(shape: Platform, source: Source, counts: dict) -> list[Expectation]:
    """What the scan's report shows: the run's event matched and its actions compared where the
    platform reads back; nothing matched or compared where it has no read-back, its
    family's limitation then being what the report says."""
    if getattr(shape, "reads_back", True):
        return [
            Expectation("reconciliation: one matched event", 1, counts.get("events_matched")),
            Expectation(
                "reconciliation: two suppressed actions",
                len(source.purposes),
                counts.get("suppressed_actions"),
            ),
            Expectation(
                "reconciliation: one converged duplicate delivery", 1, counts.get("duplicates_converged")
            ),
        ]
    return [
        Expectation("reconciliation: nothing read back, nothing matched", 0, counts.get("events_matched")),
        Expectation("reconciliation: no action compared", 0, counts.get("suppressed_actions")),
        Expectation("reconciliation: no delivery compared", 0, counts.get("duplicates_converged")),
    ]


def canary_run(*, actor: str, platform: str | None = None) -> CanaryResult:
    """Run the canary once on a platform's reserved source; the report is saved whether it passes or fails."""
    actor = actor.strip()
    if not actor:
        raise ValueError("the canary records approvals for a person: give --actor")
    platform = canary_platform_default() if platform is None else platform
    if platform not in canary_platforms():
        raise ValueError(f"unknown canary platform {platform!r}; known: {', '.join(canary_platforms())}")
    shape = canary_platform(platform)
    source = canary_source(shape)  # may raise CanaryRefused: nothing has been called yet
    run_id = uuid.uuid4().hex[:12]
    body = run_fixture(shape, run_id=run_id, at=_run_second(source, shape))
    document = json.loads(body)
    if _reserved(document, shape):
        raise CanaryRefused(
            f"the run's fixture holds identifiers that are not reserved synthetic ones: "
            f"{_reserved(document, shape)}"
        )
    # The key comes from the adapter's own normalizer, as ingest derives it.
    parsed = get_adapter(source.adapter).parse(body=body, config=source_config(source))
    if len(parsed.observations) != 1 or parsed.rejections:
        raise CanaryRefused("the fixture does not normalize to exactly one event")
    key = parsed.observations[0].event_key
    # Reconciliation compares the run's own second of the source: its event, no other run's.
    since = parsed.observations[0].occurred_at
    until = since + timedelta(seconds=1)
    expected_keys = sorted(reply_key(key, purpose) for purpose in source.purposes)
    before_event = InboundEvent.objects.filter(event_key=key).first()
    before_seen = before_event.seen_count if before_event else 0
    before_actions = ReplyAction.objects.count()
    before_events = InboundEvent.objects.count()
    calls_before = sum(CALLS.values())

    server = make_server("127.0.0.1", 0, get_wsgi_application(), handler_class=_Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    statuses, outcome, provider_applied = [], None, 0
    try:
        with (
            shape.held_source(source, document) as (fixture_url, applied),
            _signing_secret(source, shape) as secret,
        ):
            statuses = [_post(server.server_address[1], source, body, secret, shape) for _ in range(2)]
            for action in ReplyAction.objects.filter(event_id=key, delivery_state=S.REVIEW_PENDING).order_by(
                "id"
            ):
                reply_approve(action_id=action.pk, actor=actor, reason_code="approved_for_canary")
            for action in ReplyAction.objects.filter(event_id=key, delivery_state=S.APPROVED).order_by("id"):
                reply_send(action_id=action.pk)
            try:
                # Another canary run may hold the lease: wait for its page, as long as before (100 x 0.1 s).
                outcome = scan_until_done(
                    source=source,
                    trigger="canary",
                    actor=actor,
                    since=since,
                    until=until,
                    wait_seconds=10.0,
                    retry_every=0.1,
                    max_pages=100,
                    base_url=fixture_url,
                )
            except (LeaseBusy, ScanConflict, RuntimeError):
                outcome = None  # the expectation "reconciliation published" names it
            provider_applied = applied()
    finally:
        server.shutdown()
        server.server_close()

    event_rows = InboundEvent.objects.filter(event_key=key).count()
    event = InboundEvent.objects.filter(event_key=key).first()
    actions = list(ReplyAction.objects.filter(event_id=key).order_by("purpose"))
    report = ReconcileReport.objects.filter(pk=outcome.report_id).first() if outcome else None
    counts = report.summary["counts"] if report else {}
    seen = event.seen_count if event else 0
    expectations = [
        Expectation("both deliveries accepted (HTTP 200)", [200, 200], statuses),
        Expectation("the run's own event: nothing held under its key before", 0, before_seen),
        Expectation("one event row", 1, event_rows),
        Expectation(
            "one reply action per declared purpose, keyed by derivation",
            expected_keys,
            sorted(a.reply_key for a in actions),
        ),
        Expectation("seen_count two", 2, seen),
        Expectation(
            "every reply action SUPPRESSED_TEST",
            [S.SUPPRESSED_TEST] * len(source.purposes),
            [a.delivery_state for a in actions],
        ),
        Expectation(
            "one canary sink record per action",
            len(source.purposes),
            CanarySinkRecord.objects.filter(action__event_id=key).count(),
        ),
        Expectation(
            "zero external transport calls (counted at the transport boundary)",
            0,
            sum(CALLS.values()) - calls_before + provider_applied,
        ),
        Expectation("reconciliation published", "published", outcome.state if outcome else "not run"),
        *_reconciliation_expectations(shape, source, counts),
        Expectation("reconciliation: zero external calls", 0, counts.get("external_calls")),
        Expectation(
            "nothing else created",
            [before_events + 1, before_actions + len(source.purposes)],
            [InboundEvent.objects.count(), ReplyAction.objects.count()],
        ),
    ]
    failed = next((e.name for e in expectations if not e.ok), "")
    canary_report = CanaryReport.objects.create(
        created_at=dj_timezone.now(),
        actor=actor,
        ok=not failed,
        failed=failed,
        summary={
            "source": source.name,
            "run_id": run_id,
            "event_key": key,
            "first_run": before_event is None,
            "fixture": {
                "template": str(shape.fixture.relative_to(Path(settings.BASE_DIR))),
                "body": body.decode(),
            },
            "window": {"since": iso_z(since), "until": iso_z(until)},
            "seen_count": {"before": before_seen, "after": seen},
            "actions": [
                {
                    "purpose": a.purpose,
                    "reply_key": a.reply_key,
                    "delivery_state": a.delivery_state,
                    "attempt_count": a.attempt_count,
                }
                for a in actions
            ],
            "reconcile_report": report.pk if report else None,
        },
        expectations=[e.as_dict() for e in expectations],
    )
    logger.info("canary report=%s ok=%s failed=%s", canary_report.pk, canary_report.ok, failed or "-")
    return CanaryResult(canary_report, expectations)
