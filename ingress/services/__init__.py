"""Ingress writes: webhook acceptance, quarantine and its review, source registration, retention.

One module per concept; the names callers use are re-exported here."""

from __future__ import annotations

from ingress.services.body import DELIVERY_CONFLICT, EVENT_COLUMNS
from ingress.services.disconnect import source_disconnect
from ingress.services.events import (
    MARK_CHUNK,
    event_transition,
    events_occurred_at_correct,
    events_reconcile_mark,
    events_reopen_for_replies,
)
from ingress.services.evidence import message_status_correlate, message_status_review
from ingress.services.ingest import observations_accept, webhook_receive
from ingress.services.quarantine import (
    _proof_failure_record,
    _quarantine,
    quarantine_review,
    quarantine_transition,
)
from ingress.services.results import INGEST_ACTOR, EventResult, IngestResult, ProofRefused
from ingress.services.retention import retention_purge
from ingress.services.sources import (
    APP_SHARED_FIELDS,
    CONNECTION_FIELDS,
    CREDENTIAL_FIELDS,
    IMMUTABLE_FIELDS,
    MAX_NAME_LENGTH,
    REGISTERED_FIELDS,
    SourceConflict,
    source_connection_authorize,
    source_connection_clear,
    source_door_refusals,
    source_reauth_require,
    source_reauthorized,
    source_register,
    source_rename,
    source_rules_version_next,
    source_secret,
    source_update,
)

__all__ = [
    "APP_SHARED_FIELDS",
    "CONNECTION_FIELDS",
    "CREDENTIAL_FIELDS",
    "DELIVERY_CONFLICT",
    "EVENT_COLUMNS",
    "IMMUTABLE_FIELDS",
    "INGEST_ACTOR",
    "MARK_CHUNK",
    "MAX_NAME_LENGTH",
    "REGISTERED_FIELDS",
    "EventResult",
    "IngestResult",
    "ProofRefused",
    "SourceConflict",
    "_proof_failure_record",
    "_quarantine",
    "event_transition",
    "events_occurred_at_correct",
    "events_reconcile_mark",
    "events_reopen_for_replies",
    "observations_accept",
    "quarantine_review",
    "quarantine_transition",
    "retention_purge",
    "source_disconnect",
    "source_door_refusals",
    "source_connection_authorize",
    "source_connection_clear",
    "source_reauth_require",
    "source_reauthorized",
    "source_register",
    "message_status_correlate",
    "message_status_review",
    "source_rename",
    "source_secret",
    "source_rules_version_next",
    "source_update",
    "webhook_receive",
]
