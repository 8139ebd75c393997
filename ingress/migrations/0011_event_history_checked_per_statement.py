"""An event's history rows are checked against the event once per statement (conduit.references).

Reconcile's evidence mark writes a history row for each event of a whole generation in one
statement; as a foreign key, `event_id` cost a lookup and a row lock per row at commit.
"""

import django.db.models.deletion
from django.db import migrations, models

from conduit.references import Reference, checked_per_statement


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0010_events_fillfactor"),
    ]

    operations = [
        migrations.AlterField(
            model_name="eventtransition",
            name="event",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="transitions",
                to="ingress.inboundevent",
            ),
        ),
        checked_per_statement(Reference("inbound_event_transitions", "event_id", "inbound_events")),
    ]
