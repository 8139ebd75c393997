"""Seed 000's reconciliation acceptance row, with its positive control."""

import pytest

from tests.acceptance import checks


@pytest.fixture
def reconcile_parts(source_side, scan):
    state, source = source_side
    return dict(hold=state.hold_events, scan=scan, source=source, provider_state=state)


def test_reconciliation(deliver, reconcile_parts):
    assert checks.reconciliation(deliver, **reconcile_parts) == []


def test_control_reconciliation_fails_when_reconcile_mints_a_new_reply_key(deliver, reconcile_parts, monkeypatch):
    """Plant: reconciliation's replay derives reply keys its own way (a fresh key per action)."""
    import uuid

    from reconcile import services as reconcile_services
    from replies import services as reply_services

    real_accept = reconcile_services.observations_accept

    def minting_accept(**kwargs):
        derive = reply_services.reply_key
        reply_services.reply_key = lambda event_key, purpose: uuid.uuid4().hex
        try:
            return real_accept(**kwargs)
        finally:
            reply_services.reply_key = derive

    monkeypatch.setattr(reconcile_services, "observations_accept", minting_accept)
    failures = checks.reconciliation(deliver, **reconcile_parts)
    assert any("expected only" in f for f in failures), failures
