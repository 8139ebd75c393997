"""The outputs of docs/concepts/acceptance.md#report as data: the sections of the acceptance report
that describe the path.

Each section is read from where its truth lives (the adapters' declarations,
the models and the database, the transition tables, the fixture files), never
written out here, so the report cannot drift from the code it describes.
`manage.py acceptance` prints them with the results of the checks.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import connection

from conduit.canonical import sha256_hex
from conduit.sql import fast_paths

# The human-held checklist: what the recipient controls (docs/concepts/acceptance.md#human-held,
# its held inputs and its stop conditions); Conduit holds none of it.
HUMAN_HELD = [
    "Credentials and account access: connecting an account and entering its secret (in the environment only).",
    "Account connection: a human authorizes connecting each account (an owner, Ingress › Sources, "
    "Authorize account connection), and no reply route can go live until they did and the latest "
    "acceptance run on this deployment passed on the running code version.",
    "Buyer data and every actual field value: real payloads never enter fixtures, tests or reports.",
    "Trigger policy, reply copy, consent, retention periods and platform judgment.",
    "Approval of every outward action (the review queue) and enabling any live send "
    "(CONDUIT_LIVE_SEND=on and an owner's per-route switch).",
    "Quarantine decisions: every QUARANTINED receipt is reviewed by a human before any correction "
    "(Ingress › Quarantine receipts), and only policy-approved diagnostic metadata is kept.",
    "Every decision on SEND_STATUS_UNKNOWN and on reconciliation's retry candidates.",
    "Production routing, qualification and later commercial decisions.",
    "What the canary cannot prove: production credentials, platform permission, a live send.",
]


def event_contract() -> dict[str, str]:
    return {
        "source_system": "adapter's system (trusted configuration)",
        "source_account_ref": "payload account, must equal the source's",
        "source_event_id": "provider event id (optional)",
        "event_type": "allowlisted per source",
        "conversation_ref": "stable thread id",
        "message_ref": "stable message id",
        "sender_ref": "stable sender id",
        "occurred_at": "UTC; the original offset kept",
        "received_at": "first_received_at / last_received_at",
        "payload_hash": "SHA-256 of the canonical JSON of the accepted event",
        "contract_version": "per source (event-v1)",
        "canary": "trusted source configuration, never the payload",
        "trigger": "trigger_rule_version and trigger_match",
        "event_key": "system:account:type:event_id, or SHA-256(system|account|type|conversation|message)",
        "reply_key": 'SHA-256("reply|" + event_key + "|" + purpose)',
    }


def field_maps() -> dict[str, dict]:
    """Each platform's field-map section of the report, as its package registered it."""
    from reconcile.proof.platforms import field_maps as registered

    return registered()


def synthetic_fixture(canary_summary: dict | None = None) -> dict:
    """The synthetic fixture the checks deliver (its exact bytes), its derived key and purposes, and
    the body the canary run posted (the fixture with that run's own ids), when there was one."""
    from reconcile.proof.platforms import acceptance_harness

    acceptance = acceptance_harness()
    path = acceptance.FIXTURES / "comment__northstar.json"
    body = acceptance.fixture_body("comment__northstar")
    fixture = canary_summary.get("fixture") if canary_summary else None
    return {
        "file": str(path.relative_to(Path(settings.BASE_DIR))),
        "body": body.decode(),
        "sha256": sha256_hex(body),
        "event_key": acceptance.NORTHSTAR_KEY,
        "purposes": list(acceptance.PURPOSES),
        "canary_run": fixture
        and {
            "run_id": canary_summary.get("run_id"),
            "template": fixture["template"],
            "event_key": canary_summary.get("event_key"),
            "body": fixture["body"],
        },
    }


def ledger_models() -> list:
    from ingress.models import (
        Delivery,
        EventTransition,
        InboundEvent,
        QuarantineReceipt,
        QuarantineTransition,
        Source,
    )
    from reconcile.models import CanaryReport, Finding, ReconcileReport, ReconcileRun, ScanState
    from replies.models import CanarySinkRecord, ReplyAction, ReplyTransition, SendAttempt

    return [
        Source,
        InboundEvent,
        EventTransition,
        Delivery,
        QuarantineReceipt,
        QuarantineTransition,
        ReplyAction,
        ReplyTransition,
        SendAttempt,
        CanarySinkRecord,
        ReconcileRun,
        ScanState,
        Finding,
        ReconcileReport,
        CanaryReport,
    ]


def storage_schema() -> list[dict]:
    """Each ledger's table as the database holds it: its columns (type as the model declares it,
    nullability as the database has it, what a column references) and every constraint and index
    with its definition (PostgreSQL's own text; elsewhere the columns it covers)."""
    from django.db import models

    tables = []
    with connection.cursor() as cursor:
        for model in ledger_models():
            table = model._meta.db_table
            described = connection.introspection.get_table_description(cursor, table)
            found = connection.introspection.get_constraints(cursor, table)
            definitions = _definitions(cursor, table)
            fields = {f.column: f for f in model._meta.concrete_fields}
            columns = []
            for column in described:
                field = fields.get(column.name)
                declared = field.db_type(connection) if field is not None else None
                columns.append(
                    {
                        "name": column.name,
                        "type": declared or connection.introspection.get_field_type(column.type_code, column),
                        "null": bool(column.null_ok),
                        **({"primary_key": True} if field is not None and field.primary_key else {}),
                        **(
                            {
                                "references": f"{field.related_model._meta.db_table}.{field.target_field.column}"
                            }
                            if field is not None and field.is_relation and field.related_model
                            else {}
                        ),
                    }
                )
            constraints = []
            for name, c in sorted(found.items()):
                kind = (
                    "primary key"
                    if c["primary_key"]
                    else "foreign key"
                    if c["foreign_key"]
                    else "check"
                    if c["check"]
                    else "unique"
                    if c["unique"]
                    else "index"
                )
                constraints.append(
                    {
                        "name": name,
                        "kind": kind,
                        "columns": list(c["columns"] or []),
                        **({"definition": definitions[name]} if name in definitions else {}),
                    }
                )
            declared_constraints = model._meta.constraints
            tables.append(
                {
                    "table": table,
                    "model": model._meta.label,
                    "unique": [
                        c.name for c in declared_constraints if isinstance(c, models.UniqueConstraint)
                    ],
                    "checks": [c.name for c in declared_constraints if isinstance(c, models.CheckConstraint)],
                    "columns": columns,
                    "constraints": constraints,
                }
            )
    return tables


def _definitions(cursor, table: str) -> dict[str, str]:
    """{constraint or index name: its definition} as PostgreSQL prints it; empty elsewhere."""
    if not fast_paths(connection):
        return {}
    cursor.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = %s::regclass", [table]
    )
    definitions = dict(cursor.fetchall())
    cursor.execute(
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x JOIN pg_class i "
        "ON i.oid = x.indexrelid WHERE x.indrelid = %s::regclass",
        [table],
    )
    for name, definition in cursor.fetchall():
        definitions.setdefault(name, definition)  # a constraint's own text before its index's
    return definitions


def state_transitions() -> dict[str, list[str]]:
    from ingress.contract import EVENT_TABLE, QUARANTINE_TABLE
    from replies.contract import REPLY_TABLE

    return {
        table.ledger: sorted(f"{prior or 'created'} -> {nxt}" for prior, nxt in table.moves)
        for table in (EVENT_TABLE, QUARANTINE_TABLE, REPLY_TABLE)
    }
