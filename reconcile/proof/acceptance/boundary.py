"""The data boundary check: no credential, buyer payload or field value in logs, reports or pages."""

from __future__ import annotations

import base64
import json
import re
import uuid
from typing import Any

from conduit.standins import testkit
from reconcile.proof.acceptance.checks import _approve, canary
from reconcile.proof.platforms import acceptance_harness
from replies.models import ReplyAction


def _boundary_traffic(h: Any, buyer: str) -> None:
    """Everything that could leak: ingest, quarantine, approval, send, an unknown send and its
    resolution, reconciliation with a recovered event, and the canary."""
    from replies.sender import reply_send
    from replies.services import unknown_authorize_retry

    def event(n: int, text: str) -> dict:
        return {
            "id": f"evt_test_b{n}",
            "type": "comment.created",
            "post_id": "post_test_b",
            "comment_id": f"msg_test_b{n}",
            "from_id": "person_test_b",
            "created_at": f"2026-01-15T10:0{n}:00Z",
            "text": text,
        }

    events = [event(1, buyer), event(2, buyer), event(3, buyer)]
    body = json.dumps({"account": h.source.account_ref, "events": events[:2]}).encode()
    h.deliver(body)
    h.deliver(body)
    forged = h.sign(body, secret="whsec_" + base64.b64encode(b"forged-boundary-key-00000000000").decode())
    h.deliver(body, headers=forged)  # bad proof: quarantined
    h.deliver(
        json.dumps(
            {
                "account": h.source.account_ref,
                "events": [{**events[0], "id": "evt_test_b1", "text": buyer + " changed"}],
            }
        ).encode()
    )
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
    h = acceptance_harness()(
        name="boundary", account_ref="acct_test_03", secret_env="CONDUIT_SOURCE_BOUNDARY_SECRET"
    )
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
    api_user.user_permissions.set(
        Permission.objects.filter(codename__startswith="view_").exclude(codename="view_message_content")
    )
    token = Token.objects.create(user=api_user).key
    api = testkit.test_client(raise_errors=True, HTTP_AUTHORIZATION=f"Token {token}")
    for url in ("/api/events/", "/api/quarantine/", "/api/schema/"):
        response = api.get(url)
        if response.status_code != 200:
            found.append(f"GET {url} answered {response.status_code}: the search would be blind")
        search(f"GET {url}", response.content.decode())
    from reconcile.selectors import reply_decision_request

    for action in ReplyAction.objects.all():
        response = api.post(
            "/api/decisions/", data=reply_decision_request(action), content_type="application/json"
        )
        search("POST /api/decisions/", response.content.decode())

    staff = User.objects.create_user("staff_test_boundary", is_staff=True)
    staff.user_permissions.set(
        Permission.objects.filter(codename__startswith="view_").exclude(codename="view_message_content")
    )
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
    bad = [url for url in shown_to_owner if not CONTENT_PAGES.match(url)]
    if bad:
        found.append(f"the buyer text is shown beyond the reply and event pages: {bad}")
    if not shown_to_owner:
        found.append("the buyer text is not shown even to staff with the permission (the search is blind)")
    return found


# Where retained buyer text may be shown, to staff with its permission: the reply pages (the
# inbox, the queues, a reply's page) and an event's own page; never a list of events, a report
# or an export.
CONTENT_PAGES = re.compile(r"/admin/replies/|/admin/ingress/inboundevent/\d+/change/$")


def _admin_pages() -> list[str]:
    """Every admin index, changelist and change page of every registered model (three rows each),
    and the report pages and exports."""
    from django.contrib import admin
    from django.urls import NoReverseMatch, reverse

    from reconcile.models import CanaryReport, ReconcileReport

    urls = ["/admin/"]
    for model in admin.site._registry:
        opts = model._meta
        urls.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
        for pk in model._default_manager.order_by("-pk").values_list("pk", flat=True)[:3]:
            urls.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[pk]))
    for model in (ReconcileReport, CanaryReport):
        for pk in model.objects.values_list("pk", flat=True):
            try:
                urls.append(reverse(f"admin:reconcile_{model._meta.model_name}_export", args=[pk]))
            except NoReverseMatch:
                pass
    return urls
