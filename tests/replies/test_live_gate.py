"""Live sending waits for the acceptance contract (docs/concepts/acceptance.md#live).

Seed 000: "Leave the live transport disabled until the acceptance contract passes and a human
authorizes the account connection." A reply route's live flag goes on only while the latest
`manage.py acceptance` run on this deployment passed on the code version running now and a person
authorised the source's account connection; the refusal names which of the two is missing.

`enabling_failures` is the check; each positive control below plants one break of the guard and
asserts the check reports the scene that break lets through.
"""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.utils import timezone

from conduit.code_version import code_version
from ingress.models import Source
from ingress.services import source_connection_authorize, source_update
from reconcile.models import AcceptanceRun
from replies.models import ReplyRoute
from replies.services import LiveSendRefused, reply_route_update

OLD_VERSION = "0.0.1+0123456789ab"
FAILED_CHECK = "Reply identity"
NOT_AUTHORISED = "the account connection of source 'sandbox' has not been authorised by a person"


def _runs(*runs: tuple[bool, str]) -> None:
    """The deployment's acceptance record, oldest first: (passed, code version) per run."""
    AcceptanceRun.objects.all().delete()
    now = timezone.now()
    for passed, version in runs:
        AcceptanceRun.objects.create(
            ran_by="ops_test",
            started_at=now,
            finished_at=now,
            code_version=version,
            passed=passed,
            failed_check="" if passed else FAILED_CHECK,
        )


def _authorised(source: Source, yes: bool) -> None:
    Source.objects.filter(pk=source.pk).update(
        connection_authorized_by="owner_test" if yes else "",
        connection_authorized_at=timezone.now() if yes else None,
    )


# Each scene: the acceptance record, whether the connection is authorised, and the words the
# refusal must say (None: the route goes live).
SCENES = {
    "no acceptance run recorded": ((), True, "no acceptance run recorded"),
    "the latest run failed after a pass": (
        ((True, "current"), (False, "current")),
        True,
        f"latest run failed (check {FAILED_CHECK}) at ",
    ),
    "the latest pass was on another code version": (
        ((True, OLD_VERSION),),
        True,
        f"latest pass was on code version {OLD_VERSION}, this is ",
    ),
    "the account connection not authorised": (((True, "current"),), False, NOT_AUTHORISED),
    "neither": ((), False, "no acceptance run recorded"),
    "both met": (((True, "current"),), True, None),
}


def enabling_failures(source: Source) -> list[str]:
    """Each scene in which turning a route's live flag on did not do what the rule says."""
    failures = []
    route = ReplyRoute.objects.get(source=source, purpose="public_ack")
    for name, (runs, authorised, words) in SCENES.items():
        _runs(*((passed, code_version() if v == "current" else v) for passed, v in runs))
        _authorised(source, authorised)
        ReplyRoute.objects.filter(pk=route.pk).update(live_send_enabled=False)
        try:
            reply_route_update(route_id=route.pk, changes={"live_send_enabled": True})
        except LiveSendRefused as exc:
            message = str(exc)
            if words is None:
                failures.append(f"{name}: refused ({message})")
            elif words not in message:
                failures.append(f"{name}: refused without saying {words!r}: {message}")
            elif authorised and "connection:" in message:
                failures.append(f"{name}: named the connection, which is authorised: {message}")
            elif runs and runs[-1] == (True, "current") and "acceptance:" in message:
                failures.append(f"{name}: named acceptance, which passed: {message}")
        else:
            if words is not None:
                failures.append(f"{name}: the route went live")
        route.refresh_from_db()
        if (
            route.live_send_enabled
            and words is not None
            and not failures[-1:] == [f"{name}: the route went live"]
        ):
            failures.append(f"{name}: the stored flag is on")
    return failures


def test_a_route_goes_live_only_with_a_current_acceptance_pass_and_an_authorised_connection(sandbox_source):
    assert enabling_failures(sandbox_source) == []


def test_the_refusal_names_who_ran_the_failed_run_and_the_running_code_version(sandbox_source):
    _authorised(sandbox_source, True)
    route = ReplyRoute.objects.get(source=sandbox_source, purpose="public_ack")
    _runs((False, code_version()))
    with pytest.raises(
        LiveSendRefused, match=r"latest run failed \(check Reply identity\) at \S+Z by ops_test"
    ):
        reply_route_update(route_id=route.pk, changes={"live_send_enabled": True})
    _runs((True, OLD_VERSION))
    with pytest.raises(LiveSendRefused) as refused:
        reply_route_update(route_id=route.pk, changes={"live_send_enabled": True})
    assert f"latest pass was on code version {OLD_VERSION}, this is {code_version()}" in str(refused.value)


# -- positive controls: each break of the guard is reported for the scene it lets through -------


def test_control_a_gate_that_ignores_acceptance_is_reported(sandbox_source, monkeypatch):
    from replies import hooks

    monkeypatch.setattr(hooks, "_GATES", [lambda route: ""])
    failures = enabling_failures(sandbox_source)
    assert "no acceptance run recorded: the route went live" in failures
    assert "the latest run failed after a pass: the route went live" in failures


def test_control_a_gate_that_reads_the_latest_pass_instead_of_the_latest_run_is_reported(
    sandbox_source, monkeypatch
):
    from reconcile.selectors import acceptance

    monkeypatch.setattr(
        acceptance,
        "latest_acceptance_run",
        lambda: AcceptanceRun.objects.filter(passed=True).order_by("-id").first(),
    )
    assert enabling_failures(sandbox_source) == ["the latest run failed after a pass: the route went live"]


def test_control_a_gate_that_does_not_compare_code_versions_is_reported(sandbox_source, monkeypatch):
    from reconcile.selectors import acceptance

    # The running version read off the record instead of the code: every pass looks current.
    real = acceptance.code_version
    monkeypatch.setattr(
        acceptance,
        "code_version",
        lambda: getattr(AcceptanceRun.objects.order_by("-id").first(), "code_version", None) or real(),
    )
    assert enabling_failures(sandbox_source) == [
        "the latest pass was on another code version: the route went live"
    ]


def test_control_a_gate_that_does_not_ask_for_the_connection_is_reported(sandbox_source, monkeypatch):
    from replies import transports

    monkeypatch.setattr(transports, "connection_refusal", lambda route: "")
    failures = enabling_failures(sandbox_source)
    assert failures == ["the account connection not authorised: the route went live"]


def test_control_no_registered_gate_keeps_every_route_off(sandbox_source, monkeypatch):
    """Fails closed: with no gate registered (reconcile not installed), nothing goes live."""
    from replies import hooks

    monkeypatch.setattr(hooks, "_GATES", [])
    failures = enabling_failures(sandbox_source)
    assert (
        "both met: refused (live sending for 'public_ack' of source 'sandbox' stays off: acceptance: "
        "no acceptance gate registered: the reconcile app registers one in its AppConfig.ready)"
    ) in failures
    assert not any("went live" in f or "flag is on" in f for f in failures)


# -- turning off, editing, and what an upgrade leaves ----------------------------------------------


def test_turning_live_off_is_always_allowed(live_ready):
    route = ReplyRoute.objects.get(source=live_ready, purpose="public_ack")
    reply_route_update(route_id=route.pk, changes={"live_send_enabled": True})
    _runs()  # the record gone, the connection no longer authorised: nothing may go live now
    _authorised(live_ready, False)
    assert (
        reply_route_update(route_id=route.pk, changes={"live_send_enabled": False}).live_send_enabled is False
    )


def test_a_live_route_pointed_elsewhere_asks_again_and_an_unchanged_save_does_not(live_ready):
    route = ReplyRoute.objects.get(source=live_ready, purpose="public_ack")
    reply_route_update(
        route_id=route.pk, changes={"live_send_enabled": True, "target_url": "http://127.0.0.1:9"}
    )
    _runs((True, OLD_VERSION))  # an upgrade since the pass
    same = {"live_send_enabled": True, "target_url": "http://127.0.0.1:9"}
    assert reply_route_update(route_id=route.pk, changes=same).live_send_enabled is True
    with pytest.raises(LiveSendRefused, match="latest pass was on code version"):
        reply_route_update(route_id=route.pk, changes={"target_url": "http://127.0.0.1:8"})
    route.refresh_from_db()
    assert route.target_url == "http://127.0.0.1:9"


def test_a_live_route_keeps_sending_after_an_upgrade_and_doctor_says_so(live_ready, settings, monkeypatch):
    """The decision (docs/concepts/acceptance.md#live): a route already live keeps its flag and
    keeps sending when the code changes; doctor names it until acceptance passes again."""
    from reconcile.selectors import acceptance
    from replies.transports import live_send_allowed

    settings.CONDUIT_LIVE_SEND = True
    route = reply_route_update(
        route_id=ReplyRoute.objects.get(source=live_ready, purpose="public_ack").pk,
        changes={"live_send_enabled": True},
    )
    passed_on = code_version()
    assert _doctor() == (
        0,
        "public_ack (sandbox): acceptance passed on this code version, connection authorised",
    )
    monkeypatch.setattr(acceptance, "code_version", lambda: "0.1.0+newer000000")
    assert live_send_allowed(route)
    code, line = _doctor()
    assert code == 1
    assert line == (
        f"public_ack (sandbox): acceptance: latest pass was on code version {passed_on}, this is "
        "0.1.0+newer000000: run manage.py acceptance on this version"
    )


def _doctor() -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("doctor", "--no-meta-check", stdout=out, stderr=io.StringIO())
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    line = next(line for line in out.getvalue().splitlines() if line.startswith("  live routes"))
    return code, line.removeprefix("  live routes").strip()


# -- the account connection's authorisation --------------------------------------------------------


def test_the_authorisation_is_both_who_and_when_or_neither_in_the_database(sandbox_source):
    with pytest.raises(IntegrityError), transaction.atomic():
        Source.objects.filter(pk=sandbox_source.pk).update(connection_authorized_by="owner_test")
    with pytest.raises(IntegrityError), transaction.atomic():
        Source.objects.filter(pk=sandbox_source.pk).update(connection_authorized_at=timezone.now())


def test_a_change_of_the_token_the_source_acts_with_clears_the_authorisation(sandbox_source):
    source = source_connection_authorize(source_id=sandbox_source.pk, actor="owner_test")
    assert source.connection_authorized_by == "owner_test" and source.connection_authorized_at
    with pytest.raises(ValueError, match="already authorised by owner_test"):
        source_connection_authorize(source_id=sandbox_source.pk, actor="someone_else_test")
    assert source_update(source_id=source.pk, changes={"retention_days": 7}).connection_authorized_at
    moved = source_update(source_id=source.pk, changes={"token_env": "CONDUIT_SOURCE_OTHER_TOKEN"})
    assert (moved.connection_authorized_by, moved.connection_authorized_at) == ("", None)


def _staff(username: str, *groups: str) -> User:
    user = User.objects.create_user(username, password="unused-test-password", is_staff=True)
    for name in groups:
        user.groups.add(Group.objects.get(name=name))
    return user


def test_only_owners_authorise_an_account_connection_in_the_admin(client, sandbox_source):
    from django.contrib.auth.models import Permission

    form = {"action": "connection_authorize", "_selected_action": [sandbox_source.pk]}
    editor = _staff("editor_test")
    editor.user_permissions.add(*Permission.objects.filter(codename__in=["view_source", "change_source"]))
    client.force_login(editor)
    assert b"connection_authorize" not in client.get("/admin/ingress/source/").content
    client.post("/admin/ingress/source/", {**form, "confirm": "yes"})
    sandbox_source.refresh_from_db()
    assert sandbox_source.connection_authorized_at is None

    client.force_login(_staff("owner_test", "owners"))
    shown = client.post("/admin/ingress/source/", form)
    assert shown.status_code == 200 and b"your name and the time are recorded" in shown.content
    client.post("/admin/ingress/source/", {**form, "confirm": "yes"})
    sandbox_source.refresh_from_db()
    assert sandbox_source.connection_authorized_by == "owner_test"


def admin_form_failures(client, source: Source) -> list[str]:
    """What the owner's route form gets wrong when live sending may not go on yet."""
    route = ReplyRoute.objects.get(source=source, purpose="public_ack")
    url = f"/admin/replies/replyroute/{route.pk}/change/"
    form = {"transport_name": "sandbox", "target_url": "http://127.0.0.1:9", "live_send_enabled": "on"}
    _runs((True, OLD_VERSION))
    _authorised(source, False)
    try:
        response = client.post(url, form)
    except Exception as exc:  # a refusal that reaches the page as a server error
        return [f"the form raised {type(exc).__name__}: {exc}"]
    failures = []
    page = response.content.decode()
    if response.status_code != 200:
        failures.append(f"the form answered {response.status_code}, not the form with its error")
    for words in (f"latest pass was on code version {OLD_VERSION}", NOT_AUTHORISED.replace("'", "&#x27;")):
        if words not in page:
            failures.append(f"the form does not say {words!r}")
    route.refresh_from_db()
    if route.live_send_enabled:
        failures.append("the route went live")
    return failures


def test_the_route_form_says_which_requirement_is_missing(client, sandbox_source):
    client.force_login(_staff("owner_test", "owners"))
    assert admin_form_failures(client, sandbox_source) == []
    route = ReplyRoute.objects.get(source=sandbox_source, purpose="public_ack")
    page = client.get(f"/admin/replies/replyroute/{route.pk}/change/").content.decode()
    assert "Live sending requires" in page and "missing: acceptance: latest pass was on code version" in page


def test_control_a_form_that_does_not_check_is_reported(client, sandbox_source, monkeypatch):
    from replies.admin.routes import ReplyRouteAdmin

    monkeypatch.setattr(ReplyRouteAdmin, "_live_checked", staticmethod(lambda form, data, source: None))
    client.force_login(_staff("owner_test", "owners"))
    failures = admin_form_failures(client, sandbox_source)
    # The service still refuses (the route stays off), but the owner gets a server error, not words.
    assert failures and failures[0].startswith("the form raised ValidationError: ")
