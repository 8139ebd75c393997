"""Reconciliation ledgers: per-source scan state and lease, runs, staged pages, reports, findings."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from conduit.checks import MAX_INTERVAL_SECONDS
from conduit.content import ContentDigestField, ContentField
from conduit.statemachine import TransitionRecord, TransitionTable
from ingress.models import Source
from replies.models import ReplyAction


class ScanState(models.Model):
    """One per source: complete progress, the active scan, its lease and its schedule
    (docs/concepts/reconciliation.md#generations).

    Complete progress (the checkpoint) is kept apart from the active scan's
    staged progress, so an incomplete scan never moves what is authoritative.
    """

    source = models.OneToOneField(Source, on_delete=models.PROTECT, related_name="scan")
    interval_seconds = models.PositiveIntegerField(
        default=3600, help_text="Seconds between complete scans (1 second to 1 year)."
    )
    next_due_at = models.DateTimeField()
    requested_at = models.DateTimeField(null=True, blank=True)
    requested_by = models.CharField(max_length=150, blank=True)
    # Complete progress: the window end and provider position of the last complete scan.
    checkpoint_until = models.DateTimeField(null=True, blank=True)
    checkpoint_scan_id = models.CharField(max_length=4096, blank=True)
    last_completed_at = models.DateTimeField(null=True, blank=True)
    last_run = models.ForeignKey(
        "ReconcileRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    active_run = models.ForeignKey(
        "ReconcileRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The scan lease: an unpredictable token and its expiry. Empty token: free.
    lease_token = models.CharField(max_length=64, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Consecutive failed pages, and the last one's safe class, code and Conduit-authored line.
    failures = models.PositiveIntegerField(default=0)
    last_error_class = models.CharField(max_length=16, blank=True)
    last_error_code = models.CharField(max_length=64, blank=True)
    last_error_message = models.CharField(max_length=256, blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(interval_seconds__gte=1, interval_seconds__lte=MAX_INTERVAL_SECONDS),
                name="scan_interval_range",
            ),
        ]

    def __str__(self) -> str:
        return f"scan state of {self.source_id}"


class RunState(models.TextChoices):
    SCANNING = "SCANNING", "Reading the source"
    # The report and its findings are committed; repairs are being applied.
    REPAIRING = "REPAIRING", "Report written, repairing"
    PUBLISHED = "PUBLISHED", "Finished"
    DISCARDED = "DISCARDED", "Discarded"


# A run that wrote its report cannot be discarded: its repairs finish and it publishes.
RUN_TABLE = TransitionTable.declare(
    "reconcile_run",
    [
        (None, RunState.SCANNING),
        (RunState.SCANNING, RunState.REPAIRING),
        (RunState.SCANNING, RunState.DISCARDED),
        (RunState.REPAIRING, RunState.PUBLISHED),
    ],
)
ACTIVE_RUN_STATES = (RunState.SCANNING, RunState.REPAIRING)


class ReconcileRun(models.Model):
    """One scan generation of one source over a window, page by page."""

    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="reconcile_runs")
    state = models.CharField(max_length=16, choices=RunState.choices, default=RunState.SCANNING)
    trigger = models.CharField(max_length=16)  # schedule | command | admin | canary
    requested_by = models.CharField(max_length=150)
    since = models.DateTimeField(null=True, blank=True)
    until = models.DateTimeField(null=True, blank=True)
    # False for a --since/--until window: it never moves the complete checkpoint.
    complete_scan = models.BooleanField(default=True)
    scan_id = models.CharField(max_length=4096, blank=True)
    cursor = models.CharField(max_length=4096, blank=True, help_text="The next page's cursor.")
    staged_bytes = models.PositiveBigIntegerField(default=0, help_text="Bytes of the staged pages as read.")
    pages = models.PositiveIntegerField(default=0)
    page_calls = models.PositiveIntegerField(default=0, help_text="Including failed ones.")
    staged_events = models.PositiveIntegerField(default=0)
    staged_receipts = models.PositiveIntegerField(default=0)
    # Source items the contract refused: [{"page", "index", "code"}], bounded.
    rejections = models.JSONField(default=list, blank=True)
    rejection_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField()
    first_page_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    discard_reason = models.CharField(max_length=64, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [
            models.CheckConstraint(condition=Q(state__in=RunState.values), name="reconcile_run_state_valid"),
            # One active scan generation (scanning or repairing) at a time per source.
            models.UniqueConstraint(
                fields=["source"],
                condition=Q(state__in=["SCANNING", "REPAIRING"]),
                name="reconcile_one_scan_per_source",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk}"


class ReconcileRunTransition(TransitionRecord):
    run = models.ForeignKey(ReconcileRun, on_delete=models.CASCADE, related_name="transitions")

    class Meta(TransitionRecord.Meta):
        db_table = "reconcile_run_transitions"


class SeenCursor(models.Model):
    """A cursor a scan generation was handed, by its SHA-256, so a cycle A -> B -> A is caught.

    A row a page rather than a list on the run: the run's row does not grow with the cursors its
    generation is handed, and the key says whether a cursor came before. Removed when the scan
    ends, with its staging."""

    run = models.ForeignKey(ReconcileRun, on_delete=models.CASCADE, related_name="+", db_index=False)
    digest = models.CharField(max_length=64)

    class Meta:
        db_table = "reconcile_seen_cursors"
        constraints = [
            models.UniqueConstraint(fields=["run", "digest"], name="seen_cursor_once_per_run"),
        ]


class StagedEvent(models.Model):
    """A normalized source event staged by an incomplete scan; removed when the scan ends."""

    # The run is checked once per statement (conduit.references, migration 0010), not per
    # row by a foreign key: a page's COPY of a thousand rows is one check.
    run = models.ForeignKey(
        ReconcileRun, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    event_key = models.CharField(max_length=512)
    payload_hash = ContentDigestField(max_length=64)
    source_event_id = models.CharField(max_length=200, blank=True)
    event_type = models.CharField(max_length=64)
    conversation_ref = models.CharField(max_length=200)
    message_ref = models.CharField(max_length=200)
    sender_ref = models.CharField(max_length=200)
    occurred_at = models.DateTimeField()
    occurred_at_original = models.CharField(max_length=64)
    # Needed to replay a missing event through ingest (the trigger reads it); gone at publication.
    text = ContentField(blank=True)
    # The comment it answers, for a campaign's top-level-only rule (Observation.parent_ref).
    parent_ref = models.CharField(max_length=200, blank=True, db_default="")
    # The author's handle (Observation.handle), content as the text is; gone at publication.
    handle = ContentField(blank=True, db_default="")
    # Where a reply is addressed (Observation.address), content as the text is; gone at publication.
    address = ContentField(blank=True, db_default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "event_key"], name="staged_event_unique"),
        ]


class StagedReceipt(models.Model):
    """A reply the provider showed applied, staged with its scan."""

    # Checked per statement, as StagedEvent.run is.
    run = models.ForeignKey(
        ReconcileRun, on_delete=models.CASCADE, related_name="+", db_index=False, db_constraint=False
    )
    reply_key = models.CharField(max_length=64)
    provider_reply_id = models.CharField(max_length=200)
    event_key = models.CharField(max_length=512)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "reply_key"], name="staged_receipt_unique"),
        ]


class ReconcileReport(models.Model):
    """What a complete scan found, written before any repair; kept."""

    run = models.OneToOneField(ReconcileRun, on_delete=models.PROTECT, related_name="report")
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="reconcile_reports")
    created_at = models.DateTimeField()
    summary = models.JSONField()

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"reconciliation report {self.pk}"


class FindingKind(models.TextChoices):
    MISSING_LOCAL = "MISSING_LOCAL", "Missed webhook"
    SOURCE_UNVERIFIED = "SOURCE_UNVERIFIED", "Not seen on the source"
    IDENTITY_CONFLICT = "IDENTITY_CONFLICT", "Same event, different content"
    RECEIPT_ATTACHED = "RECEIPT_ATTACHED", "Receipt found"
    RECEIPT_MISSING = "RECEIPT_MISSING", "Sent, receipt missing"
    RETRY_CANDIDATE = "RETRY_CANDIDATE", "Retry candidate"
    UNEXPECTED_RECEIPT = "UNEXPECTED_RECEIPT", "Unexpected receipt"
    UNKNOWN_RECEIPT = "UNKNOWN_RECEIPT", "Unknown receipt"
    INVALID_SOURCE_ITEM = "INVALID_SOURCE_ITEM", "Unreadable source item"
    NO_STATUS = "NO_STATUS", "Sent, no status from the platform"


class Repair(models.TextChoices):
    NONE = "none", "None"
    REPLAYED = "replayed_through_ingest", "Replayed through ingest"
    MARKED_UNVERIFIED = "marked_source_unverified", "Marked not seen on the source"
    RECEIPT_ATTACHED = "receipt_attached_marked_sent", "Receipt attached, marked sent"
    MARKED_UNKNOWN = "marked_send_status_unknown", "Marked may or may not have been sent"


class Decision(models.TextChoices):
    RETRY_AUTHORIZED = "RETRY_AUTHORIZED", "Retry authorized"
    CLOSED = "CLOSED", "Closed"
    # Taken in the unknown-send queue: a person verified the provider's receipt.
    CONFIRMED_SENT = "CONFIRMED_SENT", "Confirmed sent"
    # A quarantine review of the receipt that refused the finding's repair (a replay ingest refused).
    DISMISSED = "DISMISSED", "Dismissed"
    CORRECTED = "CORRECTED", "Corrected"


class RepairOutcome(models.TextChoices):
    PLANNED = "planned", "Planned"
    APPLIED = "applied", "Applied"
    REFUSED = "refused", "Refused"
    FAILED = "failed", "Failed"


class Finding(models.Model):
    """One difference a complete scan found, the repair the rules allow, and any human decision."""

    # Indexed by (report, kind) below: a report_id index of its own would only slow the writes.
    # A report's findings are written a kind at a time (INSERT ... SELECT): report and action are
    # checked once per statement (conduit.references, migration 0011), not per row by a key.
    report = models.ForeignKey(
        ReconcileReport,
        on_delete=models.PROTECT,
        related_name="findings",
        db_index=False,
        db_constraint=False,
    )
    kind = models.CharField(max_length=32, choices=FindingKind.choices)
    event_key = models.CharField(max_length=512, blank=True)
    reply_key = models.CharField(max_length=64, blank=True)
    action = models.ForeignKey(
        ReplyAction,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="findings",
        db_constraint=False,
    )
    repair = models.CharField(max_length=32, choices=Repair.choices, default=Repair.NONE)
    # planned -> applied | refused (a move the reply ledger refused, e.g. a lost race) | failed.
    repair_outcome = models.CharField(max_length=16, blank=True)
    repair_code = models.CharField(
        max_length=64, blank=True, help_text="Why refused or failed: a stable code."
    )
    # The reply action's state the report saw: a repair is a compare-and-set on it.
    action_state = models.CharField(max_length=32, blank=True)
    detail = models.CharField(max_length=256, blank=True, help_text="Conduit-authored, no content.")
    # The quarantine receipt that refused this finding's repair (a replay ingest quarantined):
    # its review is this finding's decision.
    quarantine_receipt = models.UUIDField(null=True, blank=True)
    decision = models.CharField(max_length=32, choices=Decision.choices, blank=True)
    decided_by = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_reason = models.CharField(max_length=500, blank=True)
    decision_result = models.CharField(max_length=256, blank=True)

    class Meta:
        ordering = ["id"]
        permissions = [("decide_finding", "Can decide reconciliation findings")]
        indexes = [
            models.Index(fields=["report", "kind"], name="finding_report_kind"),
            # A scan asks, per reply it found, whether that reply's finding of a kind is open or
            # acknowledged already (reconcile.publication.already_recorded): one probe each.
            models.Index(fields=["reply_key", "kind"], name="finding_reply_kind"),
            # A quarantine review finds the findings its receipt explains.
            models.Index(
                fields=["quarantine_receipt"],
                condition=Q(quarantine_receipt__isnull=False),
                name="finding_quarantine_receipt",
            ),
            # A report lists the decisions taken since the one before it: decided findings are few.
            models.Index(fields=["decided_at"], condition=~Q(decision=""), name="finding_decided_at"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=FindingKind.values), name="finding_kind_valid"),
            models.CheckConstraint(
                condition=Q(decision__in=["", *Decision.values]), name="finding_decision_valid"
            ),
            models.CheckConstraint(
                condition=Q(decision="")
                | Q(decided_at__isnull=False) & ~Q(decided_by="") & ~Q(decision_reason=""),
                name="finding_decision_has_actor_time_reason",
            ),
            # A finding a person closes is recorded once while open: a scan that finds it
            # again counts it in its report, and the database refuses a second open row.
            models.UniqueConstraint(
                fields=["reply_key", "kind"],
                condition=Q(decision="")
                & ~Q(reply_key="")
                & Q(kind__in=["RETRY_CANDIDATE", "UNEXPECTED_RECEIPT", "UNKNOWN_RECEIPT"]),
                name="finding_one_open_per_reply_kind",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.reply_key[:12] or self.event_key}"


class RetryCandidateQueue(Finding):
    """Undecided RETRY_CANDIDATE findings: the admin queue where a person decides."""

    class Meta:
        proxy = True
        verbose_name = "retry candidate"


class SchedulerCursor(models.Model):
    """The durable round-robin position of the bounded poll: the last source name served."""

    name = models.CharField(max_length=32, unique=True)
    last_source_name = models.CharField(max_length=64, blank=True)


class CanaryReport(models.Model):
    """One run of the non-delivery canary: each expectation, what was found, pass or fail. Kept."""

    created_at = models.DateTimeField()
    actor = models.CharField(max_length=150)
    ok = models.BooleanField()
    failed = models.CharField(max_length=200, blank=True, help_text="The first failed expectation.")
    # {"event_key", "seen_count", "actions": [...], "reconcile_report", ...} and
    # [{"name", "expected", "found", "ok"}]: keys, states and counts only.
    summary = models.JSONField(default=dict)
    expectations = models.JSONField(default=list)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"canary report {self.pk} ({'pass' if self.ok else 'FAIL'})"


class AcceptanceRun(models.Model):
    """One `manage.py acceptance` run on this deployment, pass or fail, recorded after its throwaway
    database was destroyed. Kept: a live route may be enabled only while the latest run passed on
    the code version running now (docs/concepts/acceptance.md#live).

    The deployment is the database the row is in: a run is recorded where it was configured to run.
    """

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField()
    ran_by = models.CharField(max_length=150, help_text="Who ran it (--actor; the OS user by default).")
    code_version = models.CharField(
        max_length=64, help_text="The code it ran: package version + digest of the Python sources."
    )
    passed = models.BooleanField()
    failed_check = models.CharField(
        max_length=300,
        blank=True,
        help_text="The first check that failed, or control that stayed green (blank when it passed).",
    )

    class Meta:
        db_table = "reconcile_acceptance_runs"
        ordering = ["-id"]
        constraints = [
            # A pass names no failed check; a failure names the one it stopped at.
            models.CheckConstraint(
                condition=Q(passed=True, failed_check="") | (Q(passed=False) & ~Q(failed_check="")),
                name="acceptance_run_failure_named",
            ),
            models.CheckConstraint(
                condition=~Q(ran_by="") & ~Q(code_version=""), name="acceptance_run_signed"
            ),
            models.CheckConstraint(
                condition=Q(finished_at__gte=models.F("started_at")),
                name="acceptance_run_finished_after_start",
            ),
        ]

    def __str__(self) -> str:
        return f"acceptance run {self.pk} ({'pass' if self.passed else 'FAIL'})"
