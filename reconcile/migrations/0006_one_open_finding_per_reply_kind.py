"""One open finding per reply and kind, for the kinds a person closes.

A scan that found an undecided retry candidate (or an unacknowledged unexpected receipt)
again used to add another row each time: 9 rows for 3 replies after 3 demo restarts, while
doctor counted 3. Publication now records such a finding once while it is open; this partial
unique constraint (declared on Finding.Meta) makes the database refuse a second open row.

Rows already duplicated are folded first: every open duplicate after the oldest open finding
of its (reply_key, kind) is deleted. Nothing is lost by that: each was undecided, a decision on
the action decides all of its open findings at once, and each report's counts still record
what it found.
"""

from django.db import migrations, models
from django.db.models import Q

INDEX = "finding_one_open_per_reply_kind"
KINDS = ("RETRY_CANDIDATE", "UNEXPECTED_RECEIPT", "UNKNOWN_RECEIPT")


def fold_open_duplicates(apps, schema_editor) -> None:
    Finding = apps.get_model("reconcile", "Finding")
    kept: set[tuple[str, str]] = set()
    duplicates = []
    open_rows = Finding.objects.filter(kind__in=KINDS, decision="").exclude(reply_key="")
    for pk, reply_key, kind in open_rows.order_by("id").values_list("id", "reply_key", "kind").iterator():
        if (reply_key, kind) in kept:
            duplicates.append(pk)
        else:
            kept.add((reply_key, kind))
    for start in range(0, len(duplicates), 1000):
        Finding.objects.filter(pk__in=duplicates[start : start + 1000]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("reconcile", "0005_run_states_repairs_limits"),
    ]

    operations = [
        migrations.RunPython(fold_open_duplicates, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="finding",
            constraint=models.UniqueConstraint(
                fields=["reply_key", "kind"],
                condition=Q(decision="") & ~Q(reply_key="") & Q(kind__in=list(KINDS)),
                name=INDEX,
            ),
        ),
    ]
