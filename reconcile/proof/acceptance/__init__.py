"""The acceptance checks and their positive controls (docs/concepts/acceptance.md), as code an
operator can run.

Each check returns a list of failures (empty: the row holds). Each positive
control plants one fault for its own duration and runs the check it guards,
which must then report failure: a check that stays green with its guard
broken has failed as an instrument. The test suite (`tests/acceptance/`) and
`manage.py acceptance` run the same functions. The faults, patches and test
client they act through are the testkit's, reached through conduit.standins,
the one seam to the stand-ins and test-only machinery.

    checks.py       the core rows, in the order of docs/concepts/acceptance.md#checks
    boundary.py     the data boundary row
    table.py        the rows and the instrument-integrity controls

The harness the core rows act through, and each platform's own rows, are the
platform packages' (platforms/<name>/), registered through reconcile.proof.platforms.
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
from reconcile.proof.acceptance.table import CONTROLS, ROWS, Control, Row, row

__all__ = [
    "CONTROLS",
    "Control",
    "ROWS",
    "Row",
    "ambiguous_send",
    "approval_gate",
    "canary",
    "data_boundary",
    "event_identity",
    "reconciliation",
    "reply_identity",
    "required_fields",
    "row",
    "safe_retry",
    "source_proof",
    "state_model",
]
