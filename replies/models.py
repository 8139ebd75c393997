"""The reply-action ledger: at most one action per (event, declared purpose)."""

from django.db import models
from django.db.models import F, Q

from conduit.providers.registry import DEFAULT_TRANSPORT
from conduit.statemachine import TransitionRecord
from ingress.models import InboundEvent


class ApprovalState(models.TextChoices):
    REVIEW_PENDING = "REVIEW_PENDING", "Waiting for review"
    APPROVED = "APPROVED", "Approved"


class DeliveryState(models.TextChoices):
    # The labels are what a person reads; conduit.labels says what each means in one line.
    REVIEW_PENDING = "REVIEW_PENDING", "Waiting for review"
    APPROVED = "APPROVED", "Approved, waiting to be sent"
    SENDING = "SENDING", "Being sent"
    SENT = "SENT", "Sent"
    FAILED_BEFORE_SEND = "FAILED_BEFORE_SEND", "Not sent: failed before sending"
    SEND_STATUS_UNKNOWN = "SEND_STATUS_UNKNOWN", "May or may not have been sent"
    SUPPRESSED_TEST = "SUPPRESSED_TEST", "Test reply, not sent"
    CLOSED_NO_REPLY = "CLOSED_NO_REPLY", "Closed without reply"


class CampaignState(models.TextChoices):
    DRAFT = "draft"
    ACTIVE = "active"
    PAUSED = "paused"
    ENDED = "ended"


class Campaign(models.Model):
    """A person's trigger rule and copy for one account: which comments, on which posts, get which reply.

    Scope: chosen posts or media (`posts`, the platform's ids, which events carry as their
    conversation_ref), or every post. Rule: any of `keywords` as a whole word ignoring case, or
    any comment; optionally top-level comments only. It matches comments that occurred within
    [starts_at, ends_at) while it is active. A change of rule or copy is a new `version`
    (CampaignVersion keeps what each said); events and their replies keep the version they were
    matched under. The source's every-post campaign made from its keyword list is its
    `account_default` (one per source).
    """

    name = models.CharField(max_length=100, unique=True)
    # A source is deleted only while it holds no event and no copy; its campaigns go with it.
    source = models.ForeignKey("ingress.Source", on_delete=models.CASCADE, related_name="campaigns")
    every_post = models.BooleanField(default=False, help_text="Every post of the account, now and later.")
    posts = models.JSONField(default=list, blank=True, help_text="The posts or media it covers (their ids).")
    keywords = models.JSONField(
        default=list, blank=True, help_text="Any of these as a whole word, ignoring case."
    )
    any_comment = models.BooleanField(default=False, help_text="Every comment matches, whatever it says.")
    top_level_only = models.BooleanField(
        default=False, help_text="Only comments on the post itself, not replies to other comments."
    )
    purposes = models.JSONField(default=list, help_text="The source's purposes this campaign answers with.")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=CampaignState.choices, default=CampaignState.DRAFT)
    activated_at = models.DateTimeField(null=True, blank=True, editable=False)
    version = models.PositiveIntegerField(default=1, editable=False)
    account_default = models.BooleanField(default=False, editable=False)
    created_by = models.CharField(max_length=150, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "reply_campaigns"
        ordering = ["source", "name"]
        permissions = [("edit_campaign", "Can create and change campaigns and their copy")]
        constraints = [
            models.CheckConstraint(condition=Q(state__in=CampaignState.values), name="campaign_state_valid"),
            models.CheckConstraint(
                condition=Q(ends_at__isnull=True) | Q(ends_at__gt=F("starts_at")),
                name="campaign_ends_after_start",
            ),
            models.CheckConstraint(
                condition=~Q(state="active") | Q(activated_at__isnull=False),
                name="campaign_active_since",
            ),
            models.UniqueConstraint(
                fields=["source"], condition=Q(account_default=True), name="campaign_one_account_default"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class CampaignVersion(models.Model):
    """What one version of a campaign said: its scope and rule, and the copy versions per purpose."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="versions")
    version = models.PositiveIntegerField()
    rule = models.JSONField()
    copy = models.JSONField(default=dict)
    created_by = models.CharField(max_length=150)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "reply_campaign_versions"
        ordering = ["campaign", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "version"], name="campaign_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.campaign_id} v{self.version}"


class RulesVersion(models.Model):
    """What one version of a source's trigger rules was: its active campaigns, each at its version.

    Every campaign change counts the source's trigger_rule_version up and writes this row in the
    same transaction, so an event's (trigger_rule_version, trigger_match) can always be read back
    to the exact rules that decided it, a match or not.
    """

    source = models.ForeignKey("ingress.Source", on_delete=models.CASCADE, related_name="+")
    version = models.PositiveIntegerField()
    campaigns = models.JSONField(default=dict, help_text="Active campaign id -> its version.")
    created_at = models.DateTimeField()

    class Meta:
        db_table = "reply_rules_versions"
        ordering = ["source", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["source", "version"], name="rules_version_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id} rules v{self.version}"


class ReplyAction(models.Model):
    """One outward action, keyed by reply_key = SHA-256("reply|" + event_key + "|" + purpose)."""

    reply_key = models.CharField(max_length=64)
    event = models.ForeignKey(
        InboundEvent,
        to_field="event_key",
        db_column="event_key",
        on_delete=models.PROTECT,
        related_name="reply_actions",
        db_index=False,
    )
    purpose = models.CharField(max_length=64)
    # The campaign that matched the event, and the version it matched under: its copy is sent.
    # No index: reads by campaign go through the events' (source, occurred_at) and event_key indexes.
    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="actions", db_index=False)
    campaign_version = models.PositiveIntegerField()
    channel = models.CharField(max_length=64, blank=True, db_default="")
    copy_version = models.CharField(max_length=64, blank=True, db_default="")
    approval_state = models.CharField(
        max_length=32, choices=ApprovalState.choices, default=ApprovalState.REVIEW_PENDING
    )
    approved_by = models.CharField(max_length=150, blank=True, db_default="")
    approved_at = models.DateTimeField(null=True, blank=True)
    delivery_state = models.CharField(
        max_length=32, choices=DeliveryState.choices, default=DeliveryState.REVIEW_PENDING
    )
    provider_reply_id = models.CharField(max_length=200, blank=True, db_default="")
    attempt_count = models.PositiveIntegerField(db_default=0)
    last_error_code = models.CharField(max_length=64, blank=True, db_default="")
    canary = models.BooleanField(db_default=False)
    created_at = models.DateTimeField()
    # When the current SENDING claim started: the sweeper's lease clock.
    sending_since = models.DateTimeField(null=True, blank=True)
    # FAILED_BEFORE_SEND waits until then before the next automatic attempt.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # A private reply's last moment (the comment's creation + 7 days on Meta): approval after it
    # is refused and the expiry schedule closes it (replies.services). Empty: no window known.
    reply_deadline = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "reply_actions"
        ordering = ["-id"]
        permissions = [
            ("approve_replyaction", "Can approve or close reply actions"),
            ("resolve_unknown_send", "Can resolve reply actions in SEND_STATUS_UNKNOWN"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["reply_key"], name="reply_action_key_unique"),
            models.CheckConstraint(
                condition=Q(delivery_state__in=DeliveryState.values),
                name="reply_action_delivery_state_valid",
            ),
            models.CheckConstraint(
                condition=Q(approval_state__in=ApprovalState.values),
                name="reply_action_approval_state_valid",
            ),
        ]
        indexes = [
            models.Index(fields=["event"], name="reply_action_event_key"),  # no LIKE index: none reads it
            # The sender's claim scans only what may be claimed, in id order.
            models.Index(
                fields=["id"],
                name="reply_action_claimable",
                condition=Q(delivery_state__in=["APPROVED", "FAILED_BEFORE_SEND"]),
            ),
            models.Index(fields=["delivery_state", "-id"], name="reply_action_state_queue"),
            # The review queue's order (soonest deadline, NULLs last as btree keeps them, then
            # oldest), over only what waits for review: the page reads its 100 rows in order
            # instead of sorting every pending action.
            models.Index(
                fields=["reply_deadline", "id"],
                name="reply_action_review_order",
                condition=Q(delivery_state="REVIEW_PENDING"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.purpose} {self.reply_key[:12]}"


class ReplyTransition(TransitionRecord):
    # Checked once per statement (conduit.references, migration 0009), not per row by a key:
    # reconcile's replay and receipt repairs write the history of thousands of actions at once.
    action = models.ForeignKey(
        ReplyAction, on_delete=models.CASCADE, related_name="transitions", db_constraint=False
    )

    class Meta(TransitionRecord.Meta):
        db_table = "reply_action_transitions"


TEMPLATE_HELP = (
    "Optional. A WhatsApp template approved for this copy, sent once the 24-hour window has closed: "
    '{"name": "order_update", "language": "en_US", "parameters": ["..."]}'
)


class ReplyCopy(models.Model):
    """Approved copy per (campaign, purpose): a set of one or more variant texts. A new set is a new
    version (`copy_set`); old ones are kept. A reply uses one variant of the set current when it
    is shown and approved, chosen by its reply key (replies.selectors.copy_for); `copy_version`
    names the variant (unique per source and purpose, as sends and receipts look it up)."""

    source = models.ForeignKey("ingress.Source", on_delete=models.PROTECT, related_name="copies")
    campaign = models.ForeignKey(Campaign, on_delete=models.PROTECT, related_name="copies")
    purpose = models.CharField(max_length=64)
    copy_set = models.PositiveIntegerField(default=1, editable=False)
    variant = models.PositiveSmallIntegerField(default=1, editable=False)
    channel = models.CharField(max_length=64, help_text="Destination, e.g. public_reply or dm.")
    text = models.TextField()
    # The approved template sent instead of the text where free-form text is no longer allowed
    # (WhatsApp past 24 hours): {"name", "language", "parameters": [text, ...]}; {}: none.
    template = models.JSONField(default=dict, blank=True, help_text=TEMPLATE_HELP)
    copy_version = models.CharField(max_length=64, editable=False)
    created_by = models.CharField(max_length=150, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "reply_copies"
        ordering = ["source", "purpose", "-id"]
        verbose_name_plural = "reply copies"
        constraints = [
            models.UniqueConstraint(
                fields=["source", "purpose", "copy_version"], name="reply_copy_version_unique"
            ),
            models.UniqueConstraint(
                fields=["campaign", "purpose", "copy_set", "variant"], name="reply_copy_variant_unique"
            ),
            models.CheckConstraint(condition=Q(variant__gte=1), name="reply_copy_variant_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}/{self.purpose} {self.copy_version}"


class ReplyRoute(models.Model):
    """Where one source's replies of one purpose go: transport, target and the owner's live flag.

    One route per (source, purpose), so a source can send its public
    acknowledgement through one transport and its private delivery through
    another. The approved copy stays per (source, purpose) in ReplyCopy, the
    same key: the route says where, the copy what.
    """

    source = models.ForeignKey("ingress.Source", on_delete=models.PROTECT, related_name="reply_routes")
    purpose = models.CharField(max_length=64)
    transport_name = models.CharField(
        max_length=64, default=DEFAULT_TRANSPORT, help_text="Where approved replies of this purpose are sent."
    )
    target_url = models.URLField(
        blank=True, help_text="The transport's base URL, e.g. the sandbox provider's."
    )
    live_send_enabled = models.BooleanField(
        default=False,
        help_text="Owner only: allow a live transport (CONDUIT_LIVE_SEND=on must also be set).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "reply_routes"
        ordering = ["source", "purpose"]
        permissions = [("enable_live_send", "Can enable live sending for a reply route")]
        constraints = [
            models.UniqueConstraint(fields=["source", "purpose"], name="reply_route_purpose_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}/{self.purpose} -> {self.transport_name}"


class AttemptTransport(models.TextChoices):
    """How far an attempt got; the replay-decision engine reads exactly these values."""

    NOT_SENT = "not_sent"
    SENT = "sent"
    RESPONSE_RECEIVED = "response_received"


class SendAttempt(models.Model):
    """One transport attempt under a reply key. Written as `sent` before the call."""

    action = models.ForeignKey(ReplyAction, on_delete=models.PROTECT, related_name="attempts")
    attempt_number = models.PositiveIntegerField()
    at = models.DateTimeField()
    transport = models.CharField(max_length=32, choices=AttemptTransport.choices)
    http_status = models.PositiveIntegerField(null=True, blank=True)
    evidence = models.CharField(max_length=200, blank=True)
    transport_name = models.CharField(max_length=64)

    class Meta:
        db_table = "reply_send_attempts"
        ordering = ["action", "attempt_number"]
        constraints = [
            models.UniqueConstraint(fields=["action", "attempt_number"], name="send_attempt_number_unique"),
            models.CheckConstraint(
                condition=Q(transport__in=AttemptTransport.values), name="send_attempt_transport_valid"
            ),
            models.CheckConstraint(
                condition=Q(http_status__isnull=True) | Q(http_status__gte=100, http_status__lte=599),
                name="send_attempt_http_status_range",
            ),
        ]

    def __str__(self) -> str:
        return f"attempt {self.attempt_number}: {self.transport}"


class CanarySinkRecord(models.Model):
    """The non-delivery sink: what a canary action would have sent. Never leaves Conduit."""

    action = models.OneToOneField(ReplyAction, on_delete=models.PROTECT, related_name="canary_sink")
    reply_key = models.CharField(max_length=64)
    purpose = models.CharField(max_length=64)
    channel = models.CharField(max_length=64, blank=True)
    copy_version = models.CharField(max_length=64, blank=True)
    transport_name = models.CharField(max_length=64)
    at = models.DateTimeField()

    class Meta:
        db_table = "reply_canary_sink"
        ordering = ["-id"]


class Post(models.Model):
    """A post as the platform last described it, for the inbox's cards: kept each time the account's
    recent posts are read (replies.posts). The business's own words and links: no buyer content."""

    source = models.ForeignKey("ingress.Source", on_delete=models.CASCADE, related_name="+", db_index=False)
    post_ref = models.CharField(max_length=200)  # the events' conversation_ref
    caption = models.CharField(max_length=200, blank=True)
    permalink = models.CharField(max_length=1000, blank=True)
    thumbnail = models.CharField(max_length=2000, blank=True)
    kind = models.CharField(max_length=32, blank=True)
    published_at = models.DateTimeField(null=True, blank=True)
    read_at = models.DateTimeField()

    class Meta:
        db_table = "reply_posts"
        constraints = [models.UniqueConstraint(fields=["source", "post_ref"], name="reply_post_unique")]

    def __str__(self) -> str:
        return self.post_ref


class ReviewQueue(ReplyAction):
    """Admin queue: actions waiting for a person's approval (REVIEW_PENDING)."""

    class Meta:
        proxy = True
        verbose_name = "review queue item"
        verbose_name_plural = "replies waiting for review"


class UnknownSendQueue(ReplyAction):
    """Admin queue: sends that may have reached the provider (SEND_STATUS_UNKNOWN)."""

    class Meta:
        proxy = True
        verbose_name = "unknown send"
        verbose_name_plural = "sends that may or may not have gone out"


class StrandedSendQueue(ReplyAction):
    """Admin queue: FAILED_BEFORE_SEND that is exhausted or stopped (replies.selectors.sends_stranded)."""

    class Meta:
        proxy = True
        verbose_name = "stranded send"
        verbose_name_plural = "sends stuck before sending"
        permissions = [
            ("resolve_stranded_send", "Can retry now or close stranded sends (FAILED_BEFORE_SEND)"),
        ]


class SendBudget(models.Model):
    """One account's (source's) send budget for one purpose, shared by every worker.

    At most `limit` sends are claimed in any `window_seconds` (a rolling window counted over
    SendBudgetUse rows, under this row's lock, in the claim's transaction); `paused_until` holds
    the account back after a throttling answer or while the window is full. `limit` empty: no
    count is kept (pauses still apply).
    """

    source = models.ForeignKey("ingress.Source", on_delete=models.CASCADE, related_name="+")
    purpose = models.CharField(max_length=64)
    limit = models.PositiveIntegerField(null=True, blank=True)
    window_seconds = models.PositiveIntegerField(default=3600)
    paused_until = models.DateTimeField(null=True, blank=True)
    pause_reason = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        db_table = "reply_send_budgets"
        ordering = ["source", "purpose"]
        constraints = [
            models.UniqueConstraint(fields=["source", "purpose"], name="send_budget_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.source_id}/{self.purpose}: {self.limit}/{self.window_seconds}s"


class SendBudgetUse(models.Model):
    """One claimed send counted against a budget (pruned once outside every window)."""

    budget = models.ForeignKey(SendBudget, on_delete=models.CASCADE, related_name="uses")
    at = models.DateTimeField()
    action_id = models.BigIntegerField()

    class Meta:
        db_table = "reply_send_budget_uses"
        indexes = [models.Index(fields=["budget", "at"], name="send_budget_use_window")]
