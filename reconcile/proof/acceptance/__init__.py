"""The acceptance checks and their positive controls (docs/concepts/acceptance.md), as code an
operator can run.

Each check returns a list of failures (empty: the row holds). Each positive
control plants one fault for its own duration and runs the check it guards,
which must then report failure: a check that stays green with its guard
broken has failed as an instrument. The test suite (`tests/acceptance/`) and
`manage.py acceptance` run the same functions. The faults, patches and test
client they act through are the testkit's, reached through conduit.standins,
the one seam to the stand-ins and test-only machinery.

    harness.py      what the checks act through (sandbox and Meta sources on loopback stand-ins)
    checks.py       the sandbox rows, in the order of docs/concepts/acceptance.md#checks
    boundary.py     the data boundary row
    meta_checks.py  the same promises through Meta's proof, field maps and Graph read-back
    table.py        the rows and the instrument-integrity controls
"""

from reconcile.proof.acceptance.boundary import data_boundary
from reconcile.proof.acceptance.checks import (
    ambiguous_send,
    approval_gate,
    canary,
    event_identity,
    reconciliation,
    reply_identity,
    required_fields,
    safe_retry,
    source_proof,
    state_model,
)
from reconcile.proof.acceptance.harness import (
    FIXTURES,
    IDENTITY_FIXTURES,
    META_ACCOUNT,
    META_APP_ID,
    META_BUYER,
    META_HANG_SECONDS,
    META_MEDIA,
    META_ROUTES,
    META_TIMEOUT_SECONDS,
    NORTHSTAR_KEY,
    PURPOSES,
    Harness,
    MetaHarness,
    fixture_body,
)
from reconcile.proof.acceptance.meta_checks import (
    meta_ambiguous_send,
    meta_approval_gate,
    meta_event_identity,
    meta_reconciliation,
    meta_safe_retry,
    meta_source_proof,
)
from reconcile.proof.acceptance.table import CONTROLS, ROWS, Control, Row, row

__all__ = [
    "CONTROLS",
    "Control",
    "FIXTURES",
    "Harness",
    "IDENTITY_FIXTURES",
    "META_ACCOUNT",
    "META_APP_ID",
    "META_BUYER",
    "META_HANG_SECONDS",
    "META_MEDIA",
    "META_ROUTES",
    "META_TIMEOUT_SECONDS",
    "MetaHarness",
    "NORTHSTAR_KEY",
    "PURPOSES",
    "ROWS",
    "Row",
    "ambiguous_send",
    "approval_gate",
    "canary",
    "data_boundary",
    "event_identity",
    "fixture_body",
    "meta_ambiguous_send",
    "meta_approval_gate",
    "meta_event_identity",
    "meta_reconciliation",
    "meta_safe_retry",
    "meta_source_proof",
    "reconciliation",
    "reply_identity",
    "required_fields",
    "row",
    "safe_retry",
    "source_proof",
    "state_model",
]
