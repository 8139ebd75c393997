"""One waiting receipt per finding of a delivery identified by its body (Meta's), held by the
database; own items keep a text digest.

Before this, a refused Meta body's redeliveries met its first receipt only by a read before the
insert (and a body the store refused, not even that), so copies of one body posted at once, or
retries of one the store refused, could each write one. Those copies (the same
source, delivery, body, reason and member, still waiting) are dismissed here as copies of the
first, each with its transition recorded, so nothing is deleted and the constraint applies; a
copy a person already reviewed stays as reviewed.
"""

import django.db.models.functions.comparison
from django.db import migrations, models
from django.db.models import Count, F, Min, Value
from django.db.models.functions import Coalesce, Concat
from django.utils import timezone

ACTOR = "system:migration"
FINDING = ("source_id", "delivery_id", "body_sha256", "reason_code", "member")


def dismiss_copies(apps, schema_editor):
    """Keep the first waiting receipt of each authenticated finding; dismiss the later copies."""
    Receipt = apps.get_model("ingress", "QuarantineReceipt")
    Transition = apps.get_model("ingress", "QuarantineTransition")
    waiting = Receipt.objects.filter(
        authenticated=True, state="QUARANTINED", delivery_id=Concat(Value("sha256:"), F("body_sha256"))
    ).annotate(
        # An integer, not the column's positive one: a lookup of -1 on that would match nothing.
        member=Coalesce("event_index", Value(-1), output_field=models.IntegerField())
    )
    repeated = (
        waiting.values(*FINDING)
        .annotate(copies=Count("pk"), first=Min("pk"))
        .filter(copies__gt=1)
        .order_by("first")
    )
    now = timezone.now()
    for finding in repeated:
        first = Receipt.objects.values_list("receipt_id", flat=True).get(pk=finding["first"])
        copies = list(
            waiting.filter(**{name: finding[name] for name in FINDING})
            .exclude(pk=finding["first"])
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        Receipt.objects.filter(pk__in=copies).update(
            state="DISMISSED",
            reviewed_by=ACTOR,
            reviewed_at=now,
            review_note=f"a copy of receipt {first} (the same body, reason and member), written by a "
            "retry or a race before receipts were one per finding",
        )
        Transition.objects.bulk_create(
            [
                Transition(
                    receipt_id=pk,
                    ledger="quarantine",
                    prior_state="QUARANTINED",
                    next_state="DISMISSED",
                    at=now,
                    actor=ACTOR,
                    reason_code="duplicate_receipt",
                )
                for pk in copies
            ]
        )


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0011_event_history_checked_per_statement"),
    ]

    operations = [
        migrations.AddField(
            model_name="selfauthoreditem",
            name="text_digest",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.RunPython(dismiss_copies, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="quarantinereceipt",
            constraint=models.UniqueConstraint(
                models.F("source"),
                models.F("delivery_id"),
                models.F("body_sha256"),
                models.F("reason_code"),
                django.db.models.functions.comparison.Coalesce(models.F("event_index"), models.Value(-1)),
                condition=models.Q(
                    ("authenticated", True),
                    (
                        "delivery_id",
                        django.db.models.functions.text.Concat(
                            models.Value("sha256:"), models.F("body_sha256")
                        ),
                    ),
                    ("state", "QUARANTINED"),
                ),
                name="quarantine_one_waiting_per_finding",
            ),
        ),
    ]
