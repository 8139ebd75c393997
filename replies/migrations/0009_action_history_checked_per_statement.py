"""An action's history rows are checked against the action once per statement (conduit.references).

Reconcile's replay and receipt repairs write the history of thousands of actions at once; as a
foreign key, `action_id` cost a lookup and a row lock per row at commit.
"""

import django.db.models.deletion
from django.db import migrations, models

from conduit.references import Reference, checked_per_statement


class Migration(migrations.Migration):
    dependencies = [
        ("replies", "0008_review_queue_order_index"),
    ]

    operations = [
        migrations.AlterField(
            model_name="replytransition",
            name="action",
            field=models.ForeignKey(
                db_constraint=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="transitions",
                to="replies.replyaction",
            ),
        ),
        checked_per_statement(Reference("reply_action_transitions", "action_id", "reply_actions")),
    ]
