"""The review queue's order as a partial index over REVIEW_PENDING (docs/benchmarks.md#admin)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("replies", "0007_window_expiry_schedule"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="replyaction",
            index=models.Index(
                condition=models.Q(("delivery_state", "REVIEW_PENDING")),
                fields=["reply_deadline", "id"],
                name="reply_action_review_order",
            ),
        ),
    ]
