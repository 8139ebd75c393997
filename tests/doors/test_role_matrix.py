"""The role matrix: every admin URL and action and every API endpoint, asked by each
role with and without the second factor, answers as the one table in docs/roles.md says.

The doc is the expected answers: this module parses its table, finds every admin URL pattern,
admin action and root URL of the running app, fails on a row found in one and not the other,
then asks each row as each role (2FA off; required and verified; required, password only) and
fails on every cell the app answers differently, naming the row, the role and both answers.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.contrib import admin
from django.db import transaction
from django.urls import Resolver404, URLResolver, get_resolver, resolve, reverse
from django.utils import timezone

from tests.conftest import fixture_body
from tests.doors.conftest import ROLES, make_user, sign_in
from tests.reconcile.conftest import approved_and_sent, body, held_and_delivered, item

DOC = Path(__file__).resolve().parents[2] / "docs" / "roles.md"
HEADER = ["row", "request", *ROLES]
OFF, VERIFIED, PASSWORD_ONLY = "2FA off", "2FA required, verified", "2FA required, password only"
MODES = (OFF, VERIFIED, PASSWORD_ONLY)
NOT_ROLE_BASED = "n/a"
# What the API rows send: a decision the schema refuses (400) once the door lets it in.
DECISION = {"question": "replay@1"}
# Concrete paths for patterns that take any path.
ADMIN_CATCH_ALL = "/admin/no-such-page/"
API_PATHS = {"api-not-found": "/api/no-such-endpoint/"}
# The autocomplete row asks for what the route form's source field offers (Source's admin searches).
AUTOCOMPLETE = {"app_label": "replies", "model_name": "replyroute", "field_name": "source"}
PARAM = re.compile(r"<(?:\w+:)?(\w+)>")


# -- the doc ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DocRow:
    name: str
    method: str
    path: str
    answers: dict[str, str]

    @property
    def key(self) -> tuple[str, str]:
        return self.name, self.path


def _cells(line: str) -> list[str]:
    return [cell.strip().strip("`").strip() for cell in line.strip().strip("|").split("|")]


def doc_table(text: str) -> dict[tuple[str, str], DocRow]:
    """The doc's one table, by (row, path)."""
    lines = [line for line in text.splitlines() if line.lstrip().startswith("|")]
    assert lines and _cells(lines[0]) == HEADER, f"docs/roles.md: the table's header is not {HEADER}"
    rows: dict[tuple[str, str], DocRow] = {}
    for line in lines[2:]:
        cells = _cells(line)
        if cells == HEADER:
            raise AssertionError("docs/roles.md holds more than one table")
        assert len(cells) == len(HEADER), f"docs/roles.md: {len(cells)} cells in {line!r}"
        method, _, path = cells[1].partition(" ")
        row = DocRow(cells[0], method, path, dict(zip(ROLES, cells[2:])))
        assert row.key not in rows, f"docs/roles.md: {row.name} {row.path} twice"
        rows[row.key] = row
    return rows


def doc_legend(text: str) -> set[str]:
    """The answers the legend names (its lines "- `answer`: meaning")."""
    return set(re.findall(r"^- `([^`]+)`:", text, re.MULTILINE))


# -- the app's rows -------------------------------------------------------------------------


@dataclass(frozen=True)
class Found:
    kind: str  # "admin" (a GET), "action" (a POST to the changelist), "api", "other" (not role-based)
    name: str
    path: str
    model: type | None = None
    action: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return self.name, self.path


def _admin_rows() -> list[Found]:
    site = admin.site
    by_prefix = {f"{m._meta.app_label}/{m._meta.model_name}/": m for m in site._registry}
    labels = list(dict.fromkeys(m._meta.app_label for m in site._registry))
    found = []

    def walk(patterns, prefix: str, model) -> None:
        for pattern in patterns:
            route = f"{prefix}{pattern.pattern}"
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, route, model or by_prefix.get(str(pattern.pattern)))
            elif pattern.name == "app_list":  # one pattern, a page per app
                found.extend(Found("admin", "admin:app_list", f"/admin/{label}/") for label in labels)
            else:
                found.append(Found("admin", f"admin:{pattern.name or '(unnamed)'}", route, model))

    walk(site.get_urls(), "/admin/", None)
    for model, model_admin in site._registry.items():
        if model_admin.actions is None:  # no action at all, for anyone (get_actions gives none)
            continue
        meta = model._meta
        # Every action before the permission filter (get_actions(request) applies it).
        for _, name, _ in model_admin._get_base_actions():
            found.append(
                Found(
                    "action",
                    f"action {meta.app_label}.{meta.model_name} {name}",
                    f"/admin/{meta.app_label}/{meta.model_name}/",
                    model,
                    name,
                )
            )
    return found


def _root_rows() -> list[Found]:
    found = []
    for pattern in get_resolver().url_patterns:
        if isinstance(pattern, URLResolver):
            assert str(pattern.pattern) == "admin/", f"an include the matrix does not know: {pattern}"
            continue
        route = f"/{pattern.pattern}"
        kind = "api" if route.lstrip("/^").startswith("api/") else "other"
        found.append(Found(kind, pattern.name, route))
    return found


def app_rows() -> dict[tuple[str, str], Found]:
    rows = [*_admin_rows(), *_root_rows()]
    keyed = {row.key: row for row in rows}
    assert len(keyed) == len(rows), "two of the app's rows share a name and path"
    return keyed


def drift(
    doc: dict[tuple[str, str], DocRow], found: dict[tuple[str, str], Found], legend: set[str]
) -> list[str]:
    """Where the doc and the app disagree on which rows exist, or a row's cells cannot be checked."""
    problems = [
        f"in the app, not in docs/roles.md: {name} {path}" for name, path in found if (name, path) not in doc
    ]
    problems += [
        f"in docs/roles.md, not in the app: {name} {path}" for name, path in doc if (name, path) not in found
    ]
    for key, row in doc.items():
        if key not in found:
            continue
        kind = found[key].kind
        wanted = {"admin": {"GET"}, "action": {"POST"}, "api": {"GET", "POST"}}.get(kind)
        if wanted and row.method not in wanted:
            problems.append(f"{row.name} {row.path}: asked by {row.method}, not {'/'.join(sorted(wanted))}")
        for role, answer in row.answers.items():
            if (answer == NOT_ROLE_BASED) != (kind == "other"):
                problems.append(
                    f"{row.name} {row.path} for {role}: {answer!r} "
                    f"({NOT_ROLE_BASED!r} is for, and only for, rows that are not role-based)"
                )
            elif answer != NOT_ROLE_BASED and answer not in legend:
                problems.append(f"{row.name} {row.path} for {role}: {answer!r} is not in the legend")
    return problems


# -- the objects each page is asked about -----------------------------------------------------


@pytest.fixture
def matrix_objects(source_side, deliver, scan) -> dict[type, object]:
    """One row of every registered model (each queue's row in its queue): model -> pk."""
    from axes.models import AccessAttempt, AccessFailureLog, AccessLog
    from django.contrib.auth.models import User
    from django.test import RequestFactory
    from django_otp.plugins.otp_totp.models import TOTPDevice
    from django_q.models import OrmQ, Task
    from rest_framework.authtoken.models import Token, TokenProxy

    from ingress.deletion_requests import DeletionRequest
    from ingress.models import IgnoredUpdate, MessageStatus, SelfAuthoredItem
    from reconcile.models import AcceptanceRun, CanaryReport
    from replies.models import CanarySinkRecord, ReplyAction
    from replies.services import send_budget_set

    state, source = source_side
    now = timezone.now()
    # Event 1: its public_ack sent into an unknown outcome, found by a scan as a retry candidate
    # (a report, a finding, the scan state, a send attempt); its private_delivery waits for review.
    unknown = held_and_delivered(state, deliver)
    approved_and_sent(state, unknown, "refuse")
    ReplyAction.objects.filter(pk=unknown.pk).update(delivery_state="SEND_STATUS_UNKNOWN")
    scan(source)
    # Event 2: one action stranded before send, one a canary's sink record.
    assert deliver(body(item(2))).status_code == 200
    stranded, sunk = ReplyAction.objects.filter(event__source_event_id=item(2)["id"]).order_by("id")
    ReplyAction.objects.filter(pk=stranded.pk).update(
        delivery_state="FAILED_BEFORE_SEND", next_attempt_at=None
    )
    CanarySinkRecord.objects.create(
        action=sunk, reply_key=sunk.reply_key, purpose=sunk.purpose, transport_name="sandbox", at=now
    )
    assert deliver(fixture_body("comment__missing_post_id")).status_code == 202  # quarantined
    send_budget_set(source_id=source.pk, purpose="public_ack", limit=10, window_seconds=3600)
    SelfAuthoredItem.objects.create(
        source=source,
        kind="comment",
        provider_id="self_test_1",
        parent_ref="msg_test_000001",
        occurred_at=now,
        first_seen_at=now,
    )
    IgnoredUpdate.objects.create(source=source, name="comment.edited", count=1, last_seen_at=now)
    MessageStatus.objects.create(  # a failed delivery nobody reviewed: in its queue too
        source=source,
        provider_id="wamid.test_matrix",
        status="failed",
        error_code="131026",
        occurred_at=now,
        first_seen_at=now,
    )
    CanaryReport.objects.create(created_at=now, actor="tester", ok=True, summary={}, expectations=[])
    AcceptanceRun.objects.create(
        started_at=now, finished_at=now, ran_by="tester", code_version="0.1.0+matrix", passed=True
    )
    subject = User.objects.create_user(
        "matrix_subject_test"
    )  # the auth pages' user, with a device and a token
    TOTPDevice.objects.create(user=subject, name="subject phone", confirmed=True)
    Token.objects.create(user=subject)
    for model in (AccessAttempt, AccessLog, AccessFailureLog):
        extra = {"get_data": "", "post_data": "", "failures_since_start": 1} if model is AccessAttempt else {}
        model.objects.create(
            user_agent="matrix",
            ip_address="127.0.0.1",
            username="someone",
            http_accept="*/*",
            path_info="/admin/login/",
            **extra,
        )
    for success in (True, False):
        Task.objects.create(
            id=uuid.uuid4().hex,
            name=f"matrix-{success}",
            func="math.floor",
            started=now,
            stopped=now,
            success=success,
        )
    OrmQ.objects.create(key="conduit", payload="matrix", lock=now)
    DeletionRequest.objects.create(
        confirmation_code="matrix-code-0000000001",
        request_digest="a" * 64,
        user_digest="b" * 64,
        app_id="900000000000001",
        issued_at=now,
        received_at=now,
        status="COMPLETED",
        completed_at=now,
    )

    request = RequestFactory().get("/admin/")
    request.user = User(is_superuser=True, is_staff=True, is_active=True)
    objects = {}
    for model, model_admin in admin.site._registry.items():
        pk = model_admin.get_queryset(request).order_by("pk").values_list("pk", flat=True).first()
        assert pk is not None, f"no {model._meta.label} row for the matrix: add one to matrix_objects"
        objects[model] = pk
    # DRF's token admin names a token by its user's id in every URL (TokenAdmin.get_object).
    objects[TokenProxy] = TokenProxy.objects.get(pk=objects[TokenProxy]).user_id
    return objects


# -- asking each row ------------------------------------------------------------------------


def _url(row: Found, objects: dict) -> str:
    if row.path == "/admin/(?P<url>.*)$":
        return ADMIN_CATCH_ALL
    if row.name == "admin:view_on_site":
        from django.contrib.contenttypes.models import ContentType

        from ingress.models import Source

        ids = {"content_type_id": ContentType.objects.get_for_model(Source).pk, "object_id": objects[Source]}
        return PARAM.sub(lambda m: str(ids[m.group(1)]), row.path)
    if row.name == "admin:autocomplete":
        return f"{row.path}?{'&'.join(f'{k}={v}' for k, v in AUTOCOMPLETE.items())}"
    if row.kind == "api":
        return API_PATHS.get(row.name, row.path)
    # Every parameter of a model's URL is its object's key (object_id, pk, id, report_id).
    assert row.model is not None or not PARAM.search(row.path), f"no object for {row.name} {row.path}"
    return PARAM.sub(lambda m: str(objects[row.model]), row.path)


def _redirect(response) -> str:
    where = urlsplit(response["Location"]).path
    if where == reverse("admin:login"):
        return "302 login"
    if where == reverse("admin:index"):
        return "302 index"
    try:
        if resolve(where).url_name.endswith("_change"):
            return "302 change"
    except Resolver404:
        pass
    return f"302 {where}"


def _page(response) -> str:
    if response.streaming:
        b"".join(response.streaming_content)
    return _redirect(response) if response.status_code == 302 else str(response.status_code)


def _offered(client, changelist: str, cache: dict) -> set[str]:
    """The actions the changelist's menu lists for this session."""
    if changelist not in cache:
        response = client.get(changelist)
        form = response.context.get("action_form") if response.status_code == 200 else None
        cache[changelist] = {name for name, _ in form.fields["action"].choices if name} if form else set()
    return cache[changelist]


def _action(client, row: Found, objects: dict, cache: dict) -> str:
    # Posted as the changelist's menu posts it, without "confirm"; in a savepoint, so an action
    # without a confirmation step that applies at once changes nothing the next row reads.
    with transaction.atomic():
        response = client.post(
            row.path, {"action": row.action, "index": 0, "_selected_action": [objects[row.model]]}
        )
        transaction.set_rollback(True)
    if response.status_code == 302 and _redirect(response) == "302 login":
        return "302 login"
    if response.status_code in (403, 500):
        return str(response.status_code)
    listed = row.action in _offered(client, row.path, cache)
    # What this request said (earlier requests' unread messages are kept beside it).
    said = " ".join(str(m) for m in response.wsgi_request._messages._queued_messages)
    # Any page but the changelist again ("cl" is the changelist's own context) is the action's.
    confirmation = response.status_code == 200 and (response.context is None or "cl" not in response.context)
    refused = "No action selected." in said or (response.status_code == 200 and not confirmation)
    if listed and confirmation:
        return "offered"
    if listed and response.status_code == 302 and not refused:
        return "applies"
    if not listed and refused:
        return "—"
    return f"inconsistent: listed {listed}, POST answered {response.status_code} {said!r}"


def _api(client, row: Found, method: str, objects: dict) -> str:
    url = _url(row, objects)
    if method == "POST":
        response = client.post(url, DECISION, content_type="application/json")
    else:
        response = client.get(url)
    code = response.json().get("code", "") if response.status_code >= 400 else ""
    if response.status_code == 400 and code == "invalid_request":
        return "400 after the door"
    return f"403 {code}" if response.status_code == 403 else str(response.status_code)


def answer(client, row: Found, method: str, objects: dict, cache: dict) -> str:
    if row.kind == "action":
        return _action(client, row, objects, cache)
    if row.kind == "api":
        return _api(client, row, method, objects)
    return _page(client.get(_url(row, objects)))


def expected(doc_row: DocRow, kind: str, role: str, mode: str) -> str:
    """The table's answer, or under the second-factor rule the doc states: a session without a
    verified device gets the anonymous column's answer on every admin row, and 403
    second_factor_required on every API row that asks anonymous to authenticate."""
    if mode != PASSWORD_ONLY or role == "anonymous":
        return doc_row.answers[role]
    if kind in ("admin", "action"):
        return doc_row.answers["anonymous"]
    return "403 second_factor_required" if doc_row.answers["anonymous"] == "401" else doc_row.answers[role]


def matrix_mismatches(client, settings, objects: dict, *, roles=tuple(ROLES), modes=MODES) -> list[str]:
    """Every cell (row, role, mode) the app answers differently from docs/roles.md."""
    doc, found = doc_table(DOC.read_text()), app_rows()
    # Pages first, then actions, then the API: an action's savepoint never hides a page's row.
    order = {"admin": 0, "action": 1, "api": 2}
    checked = sorted(
        (row for row in found.values() if row.kind in order and row.key in doc),
        key=lambda row: order[row.kind],
    )
    problems = []
    for role in roles:
        user = make_user(role)
        for mode in modes:
            settings.CONDUIT_ADMIN_2FA = "off" if mode == OFF else "required"
            client.logout()  # a fresh session: signing the same user in again keeps the session's device
            sign_in(client, user, verified=mode == VERIFIED)
            cache: dict = {}
            client.raise_request_exception = False  # a server error is an answer too: "500"
            for row in checked:
                doc_row = doc[row.key]
                want = expected(doc_row, row.kind, role, mode)
                got = answer(client, row, doc_row.method, objects, cache)
                if got != want:
                    problems.append(
                        f"{row.name} {row.path} for {role} ({mode}): "
                        f"docs/roles.md says {want!r}, the app answers {got!r}"
                    )
    return problems


# -- the tests --------------------------------------------------------------------------------


def test_the_doc_has_a_row_for_every_admin_url_action_and_endpoint_and_no_other():
    text = DOC.read_text()
    problems = drift(doc_table(text), app_rows(), doc_legend(text))
    assert not problems, "docs/roles.md and the app differ:\n" + "\n".join(problems)


@pytest.mark.parametrize("role", list(ROLES))
def test_each_role_gets_the_documented_answer_everywhere(client, settings, matrix_objects, role):
    problems = matrix_mismatches(client, settings, matrix_objects, roles=(role,))
    assert not problems, f"{len(problems)} cells differ from docs/roles.md:\n" + "\n".join(problems)


# -- the checks can fail ------------------------------------------------------------------------


def test_control_a_row_missing_from_the_doc_and_a_row_the_app_lacks_are_named():
    text = DOC.read_text()
    doc, found = doc_table(text), app_rows()
    gone = ("admin:reconcile_canaryreport_export", "/admin/reconcile/canaryreport/<int:report_id>/export/")
    assert gone in doc
    edited = {key: row for key, row in doc.items() if key != gone}
    ghost = DocRow(
        "admin:reconcile_ghost_export", "GET", "/admin/reconcile/ghost/", dict.fromkeys(ROLES, "200")
    )
    edited[ghost.key] = ghost
    assert sorted(drift(edited, found, doc_legend(text))) == [
        f"in docs/roles.md, not in the app: {ghost.name} {ghost.path}",
        f"in the app, not in docs/roles.md: {gone[0]} {gone[1]}",
    ]


def test_control_a_model_admin_that_lets_everyone_view_is_reported_by_row_and_role(
    client, settings, matrix_objects, monkeypatch
):
    from ingress.models import QuarantineReceipt

    monkeypatch.setattr(
        admin.site._registry[QuarantineReceipt], "has_view_permission", lambda request, obj=None: True
    )
    problems = matrix_mismatches(client, settings, matrix_objects, roles=("staff_no_group",), modes=(OFF,))
    assert (
        "admin:ingress_quarantinereceipt_changelist /admin/ingress/quarantinereceipt/ for staff_no_group "
        "(2FA off): docs/roles.md says '403', the app answers '200'"
    ) in problems, problems
    # Only that model's rows changed, and only for that role.
    assert all("quarantinereceipt" in problem and "for staff_no_group" in problem for problem in problems), (
        problems
    )


def test_control_an_admin_that_forgets_the_second_factor_is_reported_row_by_row(
    client, settings, matrix_objects, monkeypatch
):
    monkeypatch.setattr(
        "conduit.door.site.second_factor_required", lambda: False
    )  # the admin's, not the API's
    problems = matrix_mismatches(
        client, settings, matrix_objects, roles=("reviewer",), modes=(PASSWORD_ONLY,)
    )
    assert (
        "admin:index /admin/ for reviewer (2FA required, password only): "
        "docs/roles.md says '302 login', the app answers '200'"
    ) in problems, problems
    # Exactly the admin rows where a reviewer's answer is not anonymous's; the API keeps its own door.
    found = app_rows()
    wanted = [
        f"{row.name} {row.path} for reviewer (2FA required, password only): docs/roles.md says "
        f"{row.answers['anonymous']!r}, the app answers {row.answers['reviewer']!r}"
        for key, row in doc_table(DOC.read_text()).items()
        if found[key].kind in ("admin", "action") and row.answers["anonymous"] != row.answers["reviewer"]
    ]
    assert sorted(problems) == sorted(wanted)
