"""Seed 000 acceptance rows covered by ingress, each with its positive control."""

import pytest
from django.db import connection

from tests.acceptance import checks

pytestmark = pytest.mark.usefixtures("sandbox_source")


def test_event_identity(deliver):
    assert checks.event_identity(deliver) == []


def test_reply_identity(deliver):
    assert checks.reply_identity(deliver) == []


def test_source_proof(deliver):
    assert checks.source_proof(deliver) == []


def test_required_fields(deliver):
    assert checks.required_fields(deliver) == []


def test_state_model(deliver):
    assert checks.state_model(deliver) == []


# Positive controls: each plants its fault for this test only (DDL is transactional
# on PostgreSQL, so the test's rollback restores the schema) and the check must fail.


def test_control_event_identity_fails_without_the_unique_constraint(deliver):
    with connection.cursor() as cursor:
        # CASCADE: reply_actions.event_key references the unique key.
        cursor.execute("ALTER TABLE inbound_events DROP CONSTRAINT inbound_event_key_unique CASCADE")
    failures = checks.event_identity(deliver)
    # Where replies are planned the reply_key constraint still refuses the second
    # plan (a 500, nothing committed); where none are, the duplicate row lands.
    assert "comment__northstar: deliveries answered [200, 500], expected [200, 200]" in failures
    assert "comment__no_trigger: expected exactly one event row, found 2" in failures


def test_control_reply_identity_fails_when_a_new_reply_key_is_minted(deliver, monkeypatch):
    import uuid

    from replies import services

    monkeypatch.setattr(services, "reply_key", lambda event_key, purpose: uuid.uuid4().hex)
    assert checks.reply_identity(deliver) != []


def test_control_reply_identity_fails_when_events_and_replies_are_not_unique(deliver):
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE inbound_events DROP CONSTRAINT inbound_event_key_unique CASCADE")
        cursor.execute("ALTER TABLE reply_actions DROP CONSTRAINT reply_action_key_unique")
    failures = checks.reply_identity(deliver)
    assert any("found 3" in f for f in failures), failures


def test_control_source_proof_fails_when_verification_is_bypassed(deliver, monkeypatch):
    from ingress.sources.base import Proof
    from ingress.sources.sandbox_social import SandboxSocialAdapter

    monkeypatch.setattr(
        SandboxSocialAdapter, "verify", lambda self, **kw: Proof(delivery_id=kw["headers"]["webhook-id"])
    )
    assert checks.source_proof(deliver) != []


def test_control_required_fields_fails_when_an_identity_field_becomes_optional(deliver, monkeypatch):
    from ingress.sources import sandbox_social

    monkeypatch.setattr(sandbox_social, "REQUIRED", ("type", "comment_id", "from_id", "created_at"))
    monkeypatch.setattr(sandbox_social, "OPTIONAL", ("id", "post_id"))
    failures = checks.required_fields(deliver)
    assert "without post_id: answered 200, expected 202" in failures


def test_control_state_model_fails_when_the_table_allows_everything(deliver, monkeypatch):
    from conduit.statemachine import TransitionTable

    monkeypatch.setattr(TransitionTable, "allows", lambda self, prior, nxt: True)
    assert checks.state_model(deliver) != []
