"""Page failures as docs/concepts/reconciliation.md#page-failures states them.

docs/concepts/reconciliation.md#page-failures: "Its class is timeout (no page within the page timeout, 30 seconds by default),
cancelled, transport (...), protocol (...), provider (...) or unauthored (...). With it go the code
and a message of at most 256 bytes on one line." And docs/concepts/reconciliation.md#scheduling:
"Failed/partial scans use a deterministic
5-second exponential backoff capped by the configured interval."
"""

from __future__ import annotations

import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command

from conduit.backoff import backoff_delay
from conduit.providers.base import PageFailure
from conduit.providers.sandbox.webhook import SandboxSocialAdapter
from reconcile import clock
from reconcile.lease import scan_state_for
from reconcile.models import ReconcileRun, ScanState
from reconcile.scan import reconcile_page
from tests.conftest import fail_next
from tests.reconcile.conftest import item


def doctor(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("doctor", *args, stdout=out, stderr=io.StringIO())
    except SystemExit as exit_:
        return exit_.code, out.getvalue()
    return 0, out.getvalue()


# -- at most 256 bytes on one line -------------------------------------------------------------


@pytest.mark.parametrize(
    "message",
    [
        "é" * 200,  # 400 bytes in 200 characters: a cut at 256 characters kept 400 bytes
        "a" * 255 + "€" * 3,  # a cut at 256 bytes would split the euro sign
        "🙂" * 100,
    ],
)
def test_the_message_is_cut_at_256_bytes_of_utf8_at_a_character_boundary(message):
    kept = PageFailure("provider", "provider_failed", message).message
    encoded = kept.encode("utf-8")
    assert len(encoded) <= 256 and encoded.decode("utf-8") == kept
    assert message.startswith(kept) and len(encoded) > 256 - 4  # as much as fits, no more


@pytest.mark.parametrize("breaker", ["\n", "\r\n", "\u2028", "\u2029", "\x85", "\x0b", "\x1e", "\x00", "\t"])
def test_the_message_is_one_line(breaker):
    kept = PageFailure("provider", "provider_failed", f"first{breaker}second").message
    assert kept == "first second" and kept.isprintable()


def test_a_short_ascii_message_is_kept_as_written():
    assert PageFailure("timeout", "page_timeout", "no page within 30 s").message == "no page within 30 s"


@pytest.mark.django_db
def test_the_stored_message_is_at_most_256_bytes(source_side, monkeypatch):
    state, source = source_side

    def read(self, **kwargs):
        raise PageFailure("provider", "provider_failed", "ünïcödé " * 40)

    monkeypatch.setattr(SandboxSocialAdapter, "read_page", read)
    assert reconcile_page(source=source).state == "failed"
    kept = ScanState.objects.get(source=source).last_error_message
    assert kept and len(kept.encode("utf-8")) <= 256


# -- cancelled ----------------------------------------------------------------------------------


def _task_deadline():
    from django_q.exceptions import TimeoutException

    return TimeoutException("Task exceeded maximum timeout value (60 seconds)")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "cancel", [_task_deadline, SystemExit, KeyboardInterrupt], ids=["task_deadline", "shutdown", "interrupt"]
)
def test_a_page_call_cancelled_by_the_deadline_or_shutdown_records_cancelled(
    source_side, monkeypatch, cancel
):
    """The cancellation still stops the call (it is re-raised), but the source shows why: class
    cancelled, code page_cancelled, the backoff, the lease free for the next worker."""
    state, source = source_side

    def read(self, **kwargs):
        raise cancel()

    monkeypatch.setattr(SandboxSocialAdapter, "read_page", read)
    with pytest.raises((SystemExit, KeyboardInterrupt)):
        reconcile_page(source=source)
    scan = ScanState.objects.get(source=source)
    assert (scan.last_error_class, scan.last_error_code, scan.failures) == ("cancelled", "page_cancelled", 1)
    assert "cancelled" in scan.last_error_message
    assert (scan.next_due_at - scan.last_error_at).total_seconds() == pytest.approx(5, abs=0.5)
    assert scan.lease_token == ""
    assert ReconcileRun.objects.get().page_calls == 1


@pytest.mark.django_db
def test_a_cancelled_commit_keeps_nothing_of_the_page_and_records_cancelled(
    source_side, monkeypatch, settings
):
    from reconcile.scan import commit as scan_commit  # where the page's commit looks page_check up

    settings.CONDUIT_RECONCILE_PAGE_SIZE = 2
    state, source = source_side
    state.hold_events(*[item(n) for n in range(1, 5)])

    def check(run, page):
        raise SystemExit(0)

    monkeypatch.setattr(scan_commit, "page_check", check)
    with pytest.raises(SystemExit):
        reconcile_page(source=source)
    scan = ScanState.objects.get(source=source)
    assert (scan.last_error_class, scan.last_error_code) == ("cancelled", "page_cancelled")
    assert ReconcileRun.objects.get().pages == 0  # the commit rolled back


def test_cancelled_is_a_class():
    assert "cancelled" in PageFailure.CLASSES
    assert PageFailure("cancelled", "page_cancelled", "x").error_class == "cancelled"


# -- retry_after never past the interval ----------------------------------------------------------


def test_a_provider_wait_lengthens_the_backoff_but_never_past_the_cap():
    assert backoff_delay(failures=1, cap=60, retry_after=3600) == 60
    assert backoff_delay(failures=1, cap=3600, retry_after=600) == 600
    assert backoff_delay(failures=3, cap=3600, retry_after=1) == 20  # shorter than the backoff: no effect
    assert backoff_delay(failures=1, cap=3600, retry_after=None) == 5


@pytest.mark.django_db
@pytest.mark.parametrize("interval, retry_after, waited", [(60, 3600, 60), (3600, 600, 600)])
def test_a_throttled_page_waits_what_the_provider_asked_capped_by_the_interval(
    source_side, monkeypatch, interval, retry_after, waited
):
    state, source = source_side
    scan_state_for(source)
    ScanState.objects.filter(source=source).update(interval_seconds=interval)

    def read(self, **kwargs):
        raise PageFailure("provider", "graph_throttled", "Meta throttled the read", retry_after=retry_after)

    monkeypatch.setattr(SandboxSocialAdapter, "read_page", read)
    assert reconcile_page(source=source).state == "failed"
    scan = ScanState.objects.get(source=source)
    assert (scan.next_due_at - scan.last_error_at).total_seconds() == pytest.approx(waited, abs=0.5)


# -- the code and Conduit's message, shown in doctor and on the source's page -------------------


@pytest.mark.django_db
def test_doctor_and_the_source_page_show_the_failures_code_and_message(source_side, admin_client):
    state, source = source_side
    fail_next(state, "page_error")
    assert reconcile_page(source=source).state == "failed"
    code, out = doctor("--no-meta-check")
    assert code == 1
    assert "last error        provider/provider_overloaded: the provider answered HTTP 503" in out
    assert "raw-provider-detail" not in out
    code, out = doctor("--json", "--no-meta-check")
    row = json.loads(out)[0]
    assert (row["last_error_class"], row["last_error_code"], row["last_error_message"]) == (
        "provider",
        "provider_overloaded",
        "the provider answered HTTP 503",
    )
    page = admin_client.get(f"/admin/ingress/source/{source.pk}/change/").content.decode()
    assert "provider/provider_overloaded: the provider answered HTTP 503" in page
    assert "raw-provider-detail" not in page
    # The next successful page clears it with the code.
    ScanState.objects.filter(source=source).update(next_due_at=clock.now() - timedelta(seconds=1))
    assert reconcile_page(source=source).state == "published"
    row = json.loads(doctor("--json", "--no-meta-check")[1])[0]
    assert (row["last_error_code"], row["last_error_message"]) == ("", "")
