"""`manage.py canary`: the whole path on the signed fixture, zero external calls, fail closed."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from ingress.models import InboundEvent
from reconcile.models import CanaryReport
from replies.models import CanarySinkRecord, ReplyAction, ReplyRoute, SendAttempt

pytestmark = pytest.mark.django_db(transaction=True)  # the webhook is served over real HTTP


def run(*args) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("canary", *args, stdout=out, stderr=err)
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    return code, out.getvalue(), err.getvalue()


def test_first_run_passes_every_expectation_and_keeps_a_report(admin_client):
    code, out, err = run("--actor", "operator_test")
    assert code == 0, out + err
    for line in (
        "ok   one event row",
        "ok   seen_count two",
        "ok   every reply action SUPPRESSED_TEST",
        "ok   zero external transport calls",
        "ok   reconciliation: one matched event",
        "ok   reconciliation: two suppressed actions",
        "ok   reconciliation: one converged duplicate delivery",
        "canary passed",
    ):
        assert line in out
    event = InboundEvent.objects.get()
    run_id = CanaryReport.objects.get().summary["run_id"]
    assert (event.event_key, event.seen_count, event.canary) == (
        f"sandbox-social:acct_test_01:comment.created:evt_test_canary_{run_id}",
        2,
        True,
    )
    assert event.message_ref == f"msg_test_canary_{run_id}"
    actions = ReplyAction.objects.all()
    assert {a.delivery_state for a in actions} == {"SUPPRESSED_TEST"} and actions.count() == 2
    assert {a.approved_by for a in actions} == {"operator_test"}
    assert CanarySinkRecord.objects.count() == 2 and not SendAttempt.objects.exists()
    report = CanaryReport.objects.get()
    assert report.ok and report.summary["reconcile_report"]
    page = admin_client.get(f"/admin/reconcile/canaryreport/{report.pk}/change/").content.decode()
    assert "Passed" in page and "every reply action SUPPRESSED_TEST" in page
    assert f'href="/admin/reconcile/canaryreport/{report.pk}/export/"' in page
    exported = json.loads(admin_client.get(f"/admin/reconcile/canaryreport/{report.pk}/export/").content)
    assert exported["ok"] is True and len(exported["expectations"]) == len(report.expectations)
    assert (
        f"/admin/reconcile/canaryreport/{report.pk}/change/ "
        f"(JSON: /admin/reconcile/canaryreport/{report.pk}/export/)"
    ) in out


# docs/concepts/canary.md#expectations: "Run the fixture twice. The expected canary evidence is one event row, one row
# per declared reply purpose, seen_count equal to two, every reply action in SUPPRESSED_TEST, and
# zero calls to an external transport." Worked example: reconciliation "reports one matched event,
# two suppressed actions, one converged duplicate delivery, and zero external calls".
EXPECTED_EVIDENCE = {
    "one event row": 1,
    "seen_count two": 2,
    "every reply action SUPPRESSED_TEST": ["SUPPRESSED_TEST", "SUPPRESSED_TEST"],
    "one canary sink record per action": 2,
    "zero external transport calls (counted at the transport boundary)": 0,
    "reconciliation: one matched event": 1,
    "reconciliation: two suppressed actions": 2,
    "reconciliation: one converged duplicate delivery": 1,
    "reconciliation: zero external calls": 0,
}


def _found(report: CanaryReport) -> dict:
    return {e["name"]: e["found"] for e in report.expectations if e["name"] in EXPECTED_EVIDENCE}


def test_every_run_proves_the_canary_sequence_on_its_own_event():
    """Each run's report shows the exact figures of docs/concepts/canary.md#expectations, not only
    the first one's."""
    for _ in range(3):
        code, out, err = run("--actor", "operator_test")
        assert code == 0, out + err
    reports = list(CanaryReport.objects.order_by("pk"))
    assert [r.ok for r in reports] == [True, True, True]
    # Not seen_count 4, then 6: each rerun counts its own event's sightings.
    assert [r.summary["seen_count"] for r in reports] == [{"before": 0, "after": 2}] * 3
    for report in reports:
        assert report.summary["first_run"]
        assert _found(report) == EXPECTED_EVIDENCE, report.expectations
        assert report.summary["event_key"].endswith(f":evt_test_canary_{report.summary['run_id']}")
        # The body it posted is the Northstar fixture with the run's own ids: the report keeps it.
        posted = json.loads(report.summary["fixture"]["body"])["events"][0]
        assert posted["id"] == f"evt_test_canary_{report.summary['run_id']}"
        assert {k: posted[k] for k in ("type", "post_id", "from_id", "text")} == {
            "type": "comment.created",
            "post_id": "post_test_07",
            "from_id": "person_test_09",
            "text": "CHECKLIST",
        }
    assert len({r.summary["event_key"] for r in reports}) == 3
    assert sorted(InboundEvent.objects.values_list("seen_count", flat=True)) == [2, 2, 2]
    assert ReplyAction.objects.count() == 6 and CanarySinkRecord.objects.count() == 6
    # No run's reconciliation judged another run's event: nothing unverified, no finding.
    assert set(InboundEvent.objects.values_list("reconcile_status", flat=True)) == {"MATCHED"}
    from reconcile.models import Finding

    assert not Finding.objects.exists()


def test_control_the_ids_fixed_as_before_show_seen_count_four_on_the_second_run():
    """The positive control: the fixture posted as it is on every run (its ids fixed, as the canary
    once ran); the second run meets the first one's event and its report says so."""
    from simulators import testkit

    with testkit.canary_ids_fixed():
        assert run("--actor", "operator_test")[0] == 0
        code, out, err = run("--actor", "operator_test")
    assert code == 1, out
    second = CanaryReport.objects.order_by("pk").last()
    found = {e["name"]: e["found"] for e in second.expectations}
    assert found["seen_count two"] == 4
    assert found["the run's own event: nothing held under its key before"] == 2
    assert found["reconciliation: one converged duplicate delivery"] == 3
    assert "FAIL seen_count two (expected 2, found 4)" in out
    assert "found sandbox-social:acct_test_01:comment.created:evt_test_0042 held already" in out
    assert InboundEvent.objects.get().seen_count == 4 and ReplyAction.objects.count() == 2


def test_a_canary_source_with_a_live_transport_fails_closed_before_any_call(monkeypatch):
    from conduit.providers import registry
    from conduit.providers.base import CALLS, Transport

    class LiveProbe(Transport):
        name = "live-probe"

        def __init__(self, url, timeout):
            pass

        def send(self, reply):
            raise AssertionError("a live transport was called")

    monkeypatch.setitem(registry.TRANSPORTS, "live-probe", LiveProbe)
    assert run("--actor", "operator_test")[0] == 0
    ReplyRoute.objects.filter(source__name="canary", purpose="private_delivery").update(
        transport_name="live-probe"
    )
    calls = sum(CALLS.values())
    seen = InboundEvent.objects.get().seen_count
    code, _, err = run("--actor", "operator_test")
    assert code == 2
    assert "refused before any network call" in err and "live transport 'live-probe'" in err
    assert sum(CALLS.values()) == calls and InboundEvent.objects.get().seen_count == seen


def test_the_reserved_account_owned_by_a_real_source_is_refused(sandbox_source):
    code, _, err = run("--actor", "operator_test")
    assert code == 2 and "registered as source 'sandbox'" in err
    assert not InboundEvent.objects.exists()


def test_an_actor_is_required():
    with pytest.raises(Exception, match="actor"):
        call_command("canary")
    assert run("--actor", "  ")[0] == 2


def test_a_failed_expectation_is_named_and_exits_non_zero(monkeypatch):
    """Break the guard: the canary action reaches the sender's transport, and the canary says so."""
    from replies.sender import deliver

    real = deliver._deliver

    def unguarded(action, now):
        action.canary = False
        return real(action, now)

    monkeypatch.setattr(deliver, "_deliver", unguarded)
    code, out, err = run("--actor", "operator_test")
    assert code == 1
    assert "FAIL every reply action SUPPRESSED_TEST" in out
    assert "canary FAILED: every reply action SUPPRESSED_TEST" in err
    assert not CanaryReport.objects.get().ok


@pytest.mark.django_db(transaction=True)
def test_the_canary_proves_a_meta_shaped_source_without_an_external_call(monkeypatch):
    """`--platform meta`: Meta's signed notification (meta_instagram/canary__comment) twice through
    /webhooks/meta/0/, replies into the sink, a read-back from a Graph simulator on this host; no
    connection leaves the host."""
    import socket

    attempted = []
    real = socket.create_connection

    def guarded(address, *args, **kwargs):
        attempted.append(address[0])
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", guarded)
    code, out, err = run("--actor", "operator_test", "--platform", "meta")
    assert code == 0, out + err
    assert "canary passed" in out
    event = InboundEvent.objects.get(source__name="canary-meta")
    run_id = CanaryReport.objects.get().summary["run_id"]
    assert event.event_key == f"meta-instagram:acct_test_ig_01:comment.created:evt_test_ig_canary_{run_id}"
    assert attempted and set(attempted) <= {"127.0.0.1"}
    # A second run finds its records and changes nothing else; the sandbox canary still runs beside it.
    assert run("--actor", "operator_test", "--platform", "meta")[0] == 0
    assert run("--actor", "operator_test")[0] == 0
    meta_events = InboundEvent.objects.filter(source__name="canary-meta")
    assert sorted(meta_events.values_list("seen_count", flat=True)) == [2, 2]
    assert all(
        key.startswith("meta-instagram:acct_test_ig_01:comment.created:evt_test_ig_canary_")
        for key in meta_events.values_list("event_key", flat=True)
    )
    for report in CanaryReport.objects.filter(summary__source="canary-meta"):
        assert {
            e["name"]: e["found"] for e in report.expectations if e["name"] in EXPECTED_EVIDENCE
        } == EXPECTED_EVIDENCE


def test_a_meta_canary_source_reading_off_this_host_fails_closed(monkeypatch):
    """Break the guard's premise: the Meta-shaped canary source pointed at Meta itself is refused
    before any call, and nothing connects anywhere."""
    import socket

    from ingress.models import Source

    assert run("--actor", "operator_test", "--platform", "meta")[0] == 0
    Source.objects.filter(name="canary-meta").update(source_url="https://graph.instagram.com/v26.0")
    attempted = []
    monkeypatch.setattr(socket, "create_connection", lambda address, *a, **k: attempted.append(address))
    code, out, err = run("--actor", "operator_test", "--platform", "meta")
    assert code == 2 and "it reads its source off this host" in err
    assert attempted == []


def test_the_canary_proves_a_whatsapp_shaped_source_without_an_external_call(monkeypatch):
    """`--platform whatsapp`: a WhatsApp message body (meta_whatsapp/canary__message) twice through
    /webhooks/meta/0/, the reply into the sink, a scan that reads nothing back (WhatsApp has none);
    no connection leaves the host, and the buyer's number is in no key."""
    import socket

    attempted = []
    real = socket.create_connection

    def guarded(address, *args, **kwargs):
        attempted.append(address[0])
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", guarded)
    code, out, err = run("--actor", "operator_test", "--platform", "whatsapp")
    assert code == 0, out + err
    event = InboundEvent.objects.get(source__name="canary-whatsapp")
    run_id = CanaryReport.objects.get().summary["run_id"]
    assert event.event_key == f"meta-whatsapp:acct_test_wa_01:message.created:evt_test_wa_canary_{run_id}"
    assert "15550100099" not in event.sender_ref and event.seen_count == 2
    assert [a.delivery_state for a in ReplyAction.objects.filter(event=event)] == ["SUPPRESSED_TEST"]
    assert set(attempted) <= {"127.0.0.1"}
    (report,) = CanaryReport.objects.filter(summary__source="canary-whatsapp")
    found = {e["name"]: e["found"] for e in report.expectations}
    assert found["reconciliation: nothing read back, nothing matched"] == 0
    assert found["reconciliation: zero external calls"] == 0
