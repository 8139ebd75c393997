"""The silent-send rule (reconcile.publication.compare.silent_sends), case by case: a reply SENT
through a transport whose platform reports a status of every message, longer ago than that
transport's `status_expected_within`, with no status reported, is a finding for a person; no
other reply is."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from conduit.providers.sandbox.transport import SandboxTransport
from ingress.statuses import MessageStatus
from reconcile.publication import compare
from reconcile.publication.compare import silent_sends
from replies.models import ReplyAction, ReplyRoute, ReplyTransition
from tests.rules.runs import other_source, run_and_report

pytestmark = pytest.mark.django_db

WITHIN = timedelta(hours=1)
NOW = timezone.now()


@pytest.fixture(autouse=True)
def transports(monkeypatch):
    """Two transports beside the registered ones: one whose platform reports every message's
    status within an hour, one that reports none."""
    for name, within in (("test_reporting", WITHIN), ("test_mute", None)):
        transport = type(name, (SandboxTransport,), {"name": name, "status_expected_within": within})
        monkeypatch.setitem(compare.TRANSPORTS, name, transport)


def _route(source, purpose: str, transport: str) -> None:
    ReplyRoute.objects.update_or_create(
        source=source, purpose=purpose, defaults={"transport_name": transport}
    )


def _sent(
    make_action, *, ago: timedelta = 2 * WITHIN, state: str = "SENT", purpose: str = "public_ack"
) -> ReplyAction:
    """An action of `purpose` in `state` whose history says it was SENT `ago` before NOW, with its
    wamid."""
    action = make_action(state, provider_reply_id=f"wamid_test_{ReplyAction.objects.count()}")
    ReplyAction.objects.filter(pk=action.pk).update(purpose=purpose)
    ReplyTransition.objects.create(
        action=action,
        ledger="reply",
        prior_state="SENDING",
        next_state="SENT",
        at=NOW - ago,
        actor="test",
        reason_code="test",
    )
    return action


def _silent(source) -> set[int]:
    found = silent_sends(source, NOW)
    return set() if found is None else set(found.values_list("pk", flat=True))


@pytest.fixture
def reporting(sandbox_source):
    _route(sandbox_source, "public_ack", "test_reporting")
    return sandbox_source


def test_a_reply_sent_long_ago_with_no_status_is_silent(reporting, make_action):
    action = _sent(make_action)
    assert _silent(reporting) == {action.pk}


def test_a_reported_status_of_its_message_takes_it_out(reporting, make_action):
    action, reported = _sent(make_action), _sent(make_action)
    MessageStatus.objects.create(
        source=reporting,
        provider_id=reported.provider_reply_id,
        status="delivered",
        occurred_at=NOW,
        first_seen_at=NOW,
    )
    assert _silent(reporting) == {action.pk}


def test_a_status_another_source_reported_for_the_same_id_does_not(reporting, make_action):
    action = _sent(make_action)
    MessageStatus.objects.create(
        source=other_source(reporting),
        provider_id=action.provider_reply_id,
        status="delivered",
        occurred_at=NOW,
        first_seen_at=NOW,
    )
    assert _silent(reporting) == {action.pk}


@pytest.mark.parametrize(
    "ago, silent",
    [(WITHIN + timedelta(seconds=1), True), (WITHIN, False), (WITHIN / 2, False)],
    ids=["past-the-time", "exactly-the-time", "within-the-time"],
)
def test_a_send_is_silent_only_once_the_transports_time_has_passed(reporting, make_action, ago, silent):
    action = _sent(make_action, ago=ago)
    assert _silent(reporting) == ({action.pk} if silent else set())


def test_only_its_own_sent_row_says_when_it_was_sent(reporting, make_action):
    """Each action is judged by its own history's SENT row: not by another action's older one,
    nor by an older row of its own that moved it to another state."""
    old, recent = _sent(make_action), _sent(make_action, ago=WITHIN / 2)
    ReplyTransition.objects.create(
        action=recent,
        ledger="reply",
        prior_state="APPROVED",
        next_state="SENDING",
        at=NOW - 3 * WITHIN,
        actor="test",
        reason_code="test",
    )
    assert _silent(reporting) == {old.pk}


@pytest.mark.parametrize("state", ["SEND_STATUS_UNKNOWN", "CLOSED_NO_REPLY", "APPROVED"])
def test_only_a_reply_still_sent_can_be_silent(reporting, make_action, state):
    _sent(make_action, state=state)
    assert _silent(reporting) == set()


def test_only_the_purposes_routed_through_a_reporting_transport(sandbox_source, make_action):
    _route(sandbox_source, "public_ack", "test_mute")
    _route(sandbox_source, "private_delivery", "test_reporting")
    _sent(make_action, purpose="public_ack")
    routed = _sent(make_action, purpose="private_delivery")
    assert _silent(sandbox_source) == {routed.pk}


def test_every_purpose_routed_through_a_reporting_transport(sandbox_source, make_action):
    _route(sandbox_source, "public_ack", "test_reporting")
    _route(sandbox_source, "private_delivery", "test_reporting")
    both = {_sent(make_action, purpose="public_ack").pk, _sent(make_action, purpose="private_delivery").pk}
    assert _silent(sandbox_source) == both


def test_only_the_sources_own_replies(reporting, make_action):
    action = _sent(make_action)
    other = other_source(reporting)
    _route(other, "public_ack", "test_reporting")
    assert _silent(reporting) == {action.pk}
    assert _silent(other) == set()


@pytest.mark.parametrize("transport", ["test_mute", "not_a_registered_transport"])
def test_with_no_route_through_a_reporting_transport_there_is_no_set(sandbox_source, make_action, transport):
    """None, not an empty set: the comparison then writes and counts nothing for this rule."""
    for purpose in ("public_ack", "private_delivery"):
        _route(sandbox_source, purpose, transport)
    _sent(make_action)
    assert silent_sends(sandbox_source, NOW) is None


NO_STATUS_DETAIL = "SENT, but the platform has reported no status of the message since: nothing resent"


def _compared(source) -> tuple[dict[str, int], object]:
    """The source's comparison (reconcile.publication), its findings written: what findings_write
    returns (per kind a person closes, found again while open), and the report."""
    from reconcile.publication import findings_write, generation_compare

    run, report = run_and_report(source)
    again = findings_write(report, run, generation_compare(source, run))
    run.state = "PUBLISHED"  # ended, so that the next comparison is another scan's
    run.save(update_fields=["state"])
    return again, report


def test_the_comparison_writes_a_silent_send_once_as_a_finding_for_a_person(reporting, make_action):
    from reconcile.models import Finding

    action = _sent(make_action)
    again, report = _compared(reporting)
    (finding,) = Finding.objects.filter(report=report, kind="NO_STATUS")
    assert (finding.action_id, finding.reply_key, finding.repair, finding.detail) == (
        action.pk,
        action.reply_key,
        "none",
        NO_STATUS_DETAIL,
    )
    assert again["NO_STATUS"] == 0
    again, report = _compared(reporting)  # found again while that one is open: counted, not written
    assert not Finding.objects.filter(report=report, kind="NO_STATUS").exists()
    assert again["NO_STATUS"] == 1


def test_without_a_reporting_route_the_comparison_finds_and_counts_no_silent_send(
    sandbox_source, make_action
):
    from reconcile.models import Finding

    _sent(make_action)
    again, report = _compared(sandbox_source)
    assert not Finding.objects.filter(kind="NO_STATUS").exists()
    assert again["NO_STATUS"] == 0
