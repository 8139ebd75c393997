"""Ingress ledgers: sources, canonical events, deliveries and quarantine receipts."""

import uuid

from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce, Concat

from conduit.content import ContentDigestField, ContentField
from conduit.statemachine import TransitionRecord
from ingress.states import EventState, QuarantineState, ReconcileStatus  # noqa: F401 (ingress.models' names)

ENV_NAME = RegexValidator(
    r"\A[A-Z_][A-Z0-9_]{0,127}\Z",
    "Give the NAME of an environment variable (upper case, digits, underscores), never its value.",
)


class Source(models.Model):
    """A registered source: identity, allowlist, purposes, trigger rule, secret NAME and read URL."""

    name = models.SlugField(
        max_length=64,
        unique=True,
        help_text="URL slug: deliveries go to /webhooks/NAME/ (Meta sources: /webhooks/meta/APP_ID/).",
    )
    adapter = models.CharField(max_length=64)
    source_system = models.CharField(max_length=64, editable=False)
    account_ref = models.CharField(max_length=200)
    event_types = models.JSONField(default=list, help_text="Allowlisted event types.")
    contract_version = models.CharField(max_length=32, default="event-v1")
    purposes = models.JSONField(default=list, blank=True, help_text="Declared reply purposes.")
    # Its trigger rules' version: each campaign change counts it up (source_rules_version_next), so a
    # webhook's write refuses a source cached before it (its row reads differently: ingress.writes).
    trigger_rule_version = models.PositiveIntegerField(default=1, editable=False)
    retention_days = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1)],
        help_text="Days message content is retained; keys, hashes and states stay.",
    )
    secret_env = models.CharField(
        max_length=128,
        validators=[ENV_NAME],
        help_text="Name of the environment variable that holds the signing secret.",
    )
    canary = models.BooleanField(
        default=False, help_text="Trusted test source: every event it accepts is a canary."
    )
    # Where replies go is replies' (reply routes per purpose); this is the read side only.
    source_url = models.URLField(
        blank=True, help_text="Base URL reconciliation reads the source's pages from (Meta: the Graph URL)."
    )
    # Meta sources: the app whose callback (/webhooks/meta/<app id>/) delivers their entries,
    # and the NAMES of the variables holding its secrets; the values stay in the environment.
    app_id = models.CharField(
        max_length=32,
        blank=True,
        db_index=True,
        validators=[RegexValidator(r"^[0-9]{1,32}$", "A Meta app id is digits.")],
        help_text="Meta app id (Meta sources only).",
    )
    secret_env_next = models.CharField(
        max_length=128,
        blank=True,
        validators=[ENV_NAME],
        help_text="Name of a second signing secret accepted while an app secret is being changed.",
    )
    verify_token_env = models.CharField(
        max_length=128,
        blank=True,
        validators=[ENV_NAME],
        help_text="Name of the variable holding the callback's verify token (Meta sources).",
    )
    token_env = models.CharField(
        max_length=128,
        blank=True,
        validators=[ENV_NAME],
        help_text="Name of the variable holding the access token reads present (Meta sources).",
    )
    connected_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When the account was connected: events that occurred before are history, never planned.",
    )
    # Meta unsubscribes an app silently: the last look at the account's subscribed_apps.
    subscription_checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    subscription_problem = models.CharField(
        max_length=256,
        blank=True,
        editable=False,
        help_text="What the last subscription check found wrong (Conduit's words), or blank.",
    )
    # Meta answered 190 (or the token variable is empty): the token is dead, so the source's sends
    # wait (never retried into it) until a person replaces the token and clears this
    # (ingress.services.source_reauthorized).
    needs_reauth = models.BooleanField(
        default=False,
        editable=False,
        help_text="Meta refused the access token: sends wait until a person re-authorises the source.",
    )
    # Seed 000: account connection is a human-only step. The person who authorised the account's
    # connection (an owner's admin action; later a connect flow), and when; a change of the
    # credentials the source acts with clears both (ingress.services.source_update).
    connection_authorized_by = models.CharField(max_length=150, blank=True, editable=False)
    connection_authorized_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        permissions = [
            ("authorize_connection", "Can authorise a source's account connection"),
            ("disconnect_account", "Can disconnect a source's account"),
            ("connect_account", "Can connect an account through its platform's login"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["source_system", "account_ref"], name="source_identity_unique"),
            # Authorised by someone at some time, or not authorised at all.
            models.CheckConstraint(
                condition=Q(connection_authorized_by="", connection_authorized_at__isnull=True)
                | (~Q(connection_authorized_by="") & Q(connection_authorized_at__isnull=False)),
                name="source_connection_authorized_by_and_at",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class SourceCredential(models.Model):
    """The access token a source acts with, encrypted (conduit/credentials.py), and what is known
    of it. Read first, before the variable `token_env` names; the token itself is never shown:
    `last_four`, the scopes and the expiry are."""

    source = models.OneToOneField(Source, on_delete=models.CASCADE, related_name="credential")
    sealed_token = models.TextField(editable=False)
    last_four = models.CharField(max_length=4, editable=False)
    scopes = models.JSONField(default=list, blank=True, editable=False)
    issued_at = models.DateTimeField(editable=False)
    expires_at = models.DateTimeField(null=True, blank=True, editable=False)
    stored_by = models.CharField(max_length=150, editable=False)
    # The platform's id of the person whose grant the token is (their signed "app removed" and
    # "delete my data" requests name it), when known; blank otherwise.
    grantor_ref = models.CharField(max_length=32, blank=True, editable=False, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            # Sealed, never plaintext: a Fernet token (version, time, IV, a block or more, MAC:
            # 73 bytes or more) is at least 100 url-safe base64 characters and starts "gAAAAA".
            models.CheckConstraint(
                condition=Q(sealed_token__regex=r"^gAAAAA[-A-Za-z0-9_=]{94,}$"), name="credential_sealed"
            ),
            models.CheckConstraint(condition=~Q(stored_by=""), name="credential_stored_by"),
            models.CheckConstraint(
                condition=Q(expires_at__isnull=True) | Q(expires_at__gt=F("issued_at")),
                name="credential_expires_after_issue",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}: …{self.last_four}"


class InboundEvent(models.Model):
    """The canonical event ledger: exactly one row per event_key."""

    event_key = models.CharField(max_length=512)
    # Indexed by (source, event_state) below; a separate FK index would be redundant.
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="events", db_index=False)
    source_system = models.CharField(max_length=64)
    source_account_ref = models.CharField(max_length=200)
    source_event_id = models.CharField(max_length=200, blank=True)
    event_type = models.CharField(max_length=64)
    conversation_ref = models.CharField(max_length=200)
    message_ref = models.CharField(max_length=200)
    sender_ref = models.CharField(max_length=200)
    occurred_at = models.DateTimeField()
    occurred_at_original = models.CharField(
        max_length=64, help_text="Audit metadata: the source timestamp as sent, offset included."
    )
    payload_hash = ContentDigestField(max_length=64)
    contract_version = models.CharField(max_length=32)
    canary = models.BooleanField()
    trigger_rule_version = models.PositiveIntegerField()
    trigger_match = models.BooleanField()
    # Which campaign matched (a replies campaign's id: ingress does not import replies, and
    # campaigns are never deleted, only ended) and the campaign's version then. Empty when none did.
    trigger_campaign = models.BigIntegerField(null=True, blank=True)
    trigger_campaign_version = models.PositiveIntegerField(null=True, blank=True)
    # The comment it answers ("" on the post itself): a campaign's top-level-only rule reads it.
    parent_ref = models.CharField(max_length=200, blank=True, db_default="")
    event_state = models.CharField(max_length=32, choices=EventState.choices)
    reconcile_status = models.CharField(
        max_length=32, choices=ReconcileStatus.choices, default=ReconcileStatus.UNRECONCILED
    )
    # Reconciliation evidence: when a complete source scan last judged this event.
    reconciled_at = models.DateTimeField(null=True, blank=True)
    first_received_at = models.DateTimeField()
    last_received_at = models.DateTimeField()
    seen_count = models.PositiveIntegerField(default=1)
    # Retained content: purged on the source's retention rule; never logged.
    message_text = ContentField(blank=True)
    # The author's handle as the platform showed it (Observation.handle): content, purged with the text.
    sender_handle = ContentField(blank=True, db_default="")
    # Where a reply is addressed when sender_ref is opaque (Observation.address): content, purged with the text.
    reply_address = ContentField(blank=True, db_default="")
    content_purged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "inbound_events"
        ordering = ["-id"]
        permissions = [("view_message_content", "Can view retained message content")]
        constraints = [
            models.UniqueConstraint(fields=["event_key"], name="inbound_event_key_unique"),
            models.CheckConstraint(
                condition=Q(event_state__in=EventState.values), name="inbound_event_state_valid"
            ),
            models.CheckConstraint(
                condition=Q(reconcile_status__in=ReconcileStatus.values),
                name="inbound_event_reconcile_status_valid",
            ),
            models.CheckConstraint(condition=Q(seen_count__gte=1), name="inbound_event_seen_positive"),
        ]
        indexes = [
            models.Index(fields=["source", "event_state"], name="inbound_event_src_state"),
            # A reconcile window is a range of occurred_at within one source.
            models.Index(fields=["source", "occurred_at"], name="inbound_event_src_occurred"),
            # The admin's search by the source's own ids (exact matches, beside event_key's unique index).
            models.Index(fields=["source_event_id"], name="inbound_event_source_event_id"),
            models.Index(fields=["message_ref"], name="inbound_event_message_ref"),
            # A post's events: the search for a post id, the inbox's "earlier comments by this person".
            models.Index(fields=["conversation_ref", "sender_ref"], name="inbound_event_post_sender"),
        ]

    def __str__(self) -> str:
        return self.event_key


class EventTransition(TransitionRecord):
    # Checked once per statement (conduit.references, migration 0011), not per row by a key:
    # reconcile's evidence mark writes the history of a whole generation in one statement.
    event = models.ForeignKey(
        InboundEvent, on_delete=models.CASCADE, related_name="transitions", db_constraint=False
    )

    class Meta(TransitionRecord.Meta):
        db_table = "inbound_event_transitions"


class Delivery(models.Model):
    """One row per (source, delivery id): the first authenticated envelope of a delivery."""

    # Indexed by the (source, delivery_id) unique constraint.
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="deliveries", db_index=False)
    delivery_id = models.CharField(max_length=200)
    body_hash = models.CharField(max_length=64, help_text="SHA-256 of the first envelope's body.")
    event_keys = models.JSONField(default=list)
    first_received_at = models.DateTimeField()
    last_received_at = models.DateTimeField()
    seen_count = models.PositiveIntegerField(default=1)

    class Meta:
        db_table = "ingress_deliveries"
        ordering = ["-id"]
        verbose_name_plural = "deliveries"
        constraints = [
            models.UniqueConstraint(fields=["source", "delivery_id"], name="delivery_identity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.delivery_id}"


# The constraint that keeps one waiting receipt per finding of a delivery identified by its body:
# its name is how a writer that lost a race to it (the shared callback) tells that race from a broken
# invariant.
ONE_WAITING_RECEIPT = "quarantine_one_waiting_per_finding"


class QuarantineReceipt(models.Model):
    """The quarantine ledger: input that failed proof or identity, kept for review.

    A finding (one body, reason and member) of a delivery that has no id but its body's hash
    (Meta's) waits for review once: a retry, or copies of the body posted at once, meet its
    receipt (database constraint below).
    """

    receipt_id = models.UUIDField(default=uuid.uuid4, editable=False)
    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="quarantine")
    reason_code = models.CharField(max_length=64)
    detail = models.CharField(max_length=256, blank=True, help_text="Conduit-authored, no content.")
    state = models.CharField(
        max_length=32, choices=QuarantineState.choices, default=QuarantineState.QUARANTINED
    )
    authenticated = models.BooleanField(help_text="Whether the source proof passed.")
    received_at = models.DateTimeField()
    delivery_id = models.CharField(max_length=200, blank=True)
    event_index = models.PositiveIntegerField(null=True, blank=True)
    event_key = models.CharField(max_length=512, blank=True)
    body_sha256 = models.CharField(max_length=64)
    body_bytes = models.PositiveIntegerField()
    invalid_members = models.JSONField(
        default=list,
        blank=True,
        help_text="A refused batch: each invalid member's index and reason code (never content).",
    )
    reviewed_by = models.CharField(max_length=150, blank=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True)

    class Meta:
        db_table = "quarantine_receipts"
        ordering = ["-id"]
        permissions = [("review_quarantinereceipt", "Can review quarantine receipts")]
        # A refused body's redeliveries find its first receipt by delivery id.
        indexes = [
            models.Index(fields=["source", "delivery_id"], name="quarantine_delivery_idx"),
            # What waits for review, counted per source by /metrics and the admin without the history.
            models.Index(fields=["source"], condition=Q(state="QUARANTINED"), name="quarantine_waiting_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["receipt_id"], name="quarantine_receipt_id_unique"),
            models.CheckConstraint(
                condition=Q(state__in=QuarantineState.values), name="quarantine_state_valid"
            ),
            # One waiting receipt per source, delivery, body, reason and member (a whole body's
            # finding has no member: -1 stands for it, as NULLs never collide in a unique index).
            # Only authenticated receipts: an unauthenticated one is bounded per minute instead
            # (ProofFailureWindow). Only waiting ones: a reviewed receipt is history, met by a read
            # (shared_callback._receipt_once); the race this settles is between copies of a body
            # arriving before any receipt exists. Only deliveries whose id is their body's hash
            # (`sha256:<body_sha256>`, Meta's, which sends no id): every copy of those bytes is
            # the same delivery, and their writer (the shared callback) runs a copy that lost the race
            # again. A provider's own delivery ids are met by a read in ingress.services, which
            # does not yet run a lost race again: its receipts join when it does.
            models.UniqueConstraint(
                F("source"),
                F("delivery_id"),
                F("body_sha256"),
                F("reason_code"),
                Coalesce(F("event_index"), Value(-1)),
                condition=Q(
                    authenticated=True,
                    state="QUARANTINED",
                    delivery_id=Concat(Value("sha256:"), F("body_sha256")),
                ),
                name=ONE_WAITING_RECEIPT,
            ),
        ]

    def __str__(self) -> str:
        return f"{self.receipt_id} {self.reason_code}"


class QuarantineTransition(TransitionRecord):
    receipt = models.ForeignKey(QuarantineReceipt, on_delete=models.CASCADE, related_name="transitions")

    class Meta(TransitionRecord.Meta):
        db_table = "quarantine_transitions"


class ProofFailureWindow(models.Model):
    """Unauthenticated failures of one source and proof code in one minute, coalesced.

    The first failure of each kind in a minute gets a full quarantine receipt;
    the rest only count here, so forged traffic writes a bounded number of rows.
    """

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+", db_index=False)
    reason_code = models.CharField(max_length=64)
    window_start = models.DateTimeField()
    failures = models.PositiveIntegerField(default=1)
    first_receipt = models.ForeignKey(
        QuarantineReceipt, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        db_table = "ingress_proof_failure_windows"
        ordering = ["-window_start"]
        constraints = [
            models.UniqueConstraint(
                fields=["source", "reason_code", "window_start"], name="proof_failure_window_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}:{self.reason_code}@{self.window_start:%Y-%m-%d %H:%M} x{self.failures}"


class SelfAuthoredItem(models.Model):
    """Something the account itself authored (its comment, the echo of its message).

    Receipt evidence for replies Conduit sent, never an inbound event.
    """

    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="+", db_index=False)
    kind = models.CharField(max_length=16)  # comment | message
    provider_id = models.CharField(max_length=200)
    parent_ref = models.CharField(max_length=200, help_text="The comment answered, or the person written to.")
    correlation = models.CharField(max_length=1000, blank=True, help_text="What the platform echoed back.")
    # conduit.providers.base.reply_text_digest of the item's text (the text itself is never kept):
    # a receipt is matched to the approved copy by it. The first digest seen is kept.
    text_digest = models.CharField(max_length=64, blank=True, default="")
    occurred_at = models.DateTimeField()
    first_seen_at = models.DateTimeField()
    seen_count = models.PositiveIntegerField(default=1)

    class Meta:
        db_table = "ingress_self_authored"
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["source", "kind", "provider_id"], name="self_authored_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.kind}:{self.provider_id}"


class IgnoredUpdate(models.Model):
    """Updates outside a source's allowlist (another field, item or event type), counted by name."""

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="+", db_index=False)
    name = models.CharField(max_length=64)
    count = models.PositiveBigIntegerField(default=0)
    last_seen_at = models.DateTimeField()

    class Meta:
        db_table = "ingress_ignored_updates"
        ordering = ["source", "name"]
        constraints = [models.UniqueConstraint(fields=["source", "name"], name="ignored_update_unique")]

    def __str__(self) -> str:
        return f"{self.name} x{self.count}"


# Registered with the app's models (a module of its own: this one is at its size).
from ingress.deletion_requests import DeletionRequest  # noqa: E402, F401

# What the platform reported of messages the account sent: a ledger of its own room.
from ingress.statuses import MessageStatus, UndeliveredMessage  # noqa: E402, F401
