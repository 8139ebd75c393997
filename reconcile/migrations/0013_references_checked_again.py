"""The statement-checked references' functions and triggers, created again (conduit.references).

The check now reads existence and the rows to lock in one snapshot and counts a target a
waited-for delete took as missing; it compares xmin with this transaction's own xid
(`age()` could read 0 for another transaction's row); and truncating a referred-to table
is refused while rows refer to it. CREATE OR REPLACE: a database that ran the earlier
migrations gets the same functions and triggers as a new one. Going back leaves them.
"""

from django.db import migrations

from conduit.references import Reference, checked_per_statement

REFERENCES = (
    Reference("reconcile_stagedevent", "run_id", "reconcile_reconcilerun"),
    Reference("reconcile_stagedreceipt", "run_id", "reconcile_reconcilerun"),
    Reference("reconcile_finding", "report_id", "reconcile_reconcilereport"),
    Reference("reconcile_finding", "action_id", "reply_actions"),
    Reference("inbound_event_transitions", "event_id", "inbound_events"),
    Reference("reply_action_transitions", "action_id", "reply_actions"),
)


class Migration(migrations.Migration):
    dependencies = [
        ("reconcile", "0012_findings_fillfactor"),
        ("ingress", "0011_event_history_checked_per_statement"),
        ("replies", "0009_action_history_checked_per_statement"),
    ]

    operations = [migrations.RunPython(checked_per_statement(*REFERENCES).code, migrations.RunPython.noop)]
