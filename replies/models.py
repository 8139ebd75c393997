"""The reply-action ledger: at most one action per (event, declared purpose)."""

from django.db import models
from django.db.models import Q

from conduit.statemachine import TransitionRecord
from ingress.models import InboundEvent


class ApprovalState(models.TextChoices):
    REVIEW_PENDING = "REVIEW_PENDING"
    APPROVED = "APPROVED"


class DeliveryState(models.TextChoices):
    REVIEW_PENDING = "REVIEW_PENDING"
    APPROVED = "APPROVED"
    SENDING = "SENDING"
    SENT = "SENT"
    FAILED_BEFORE_SEND = "FAILED_BEFORE_SEND"
    SEND_STATUS_UNKNOWN = "SEND_STATUS_UNKNOWN"
    SUPPRESSED_TEST = "SUPPRESSED_TEST"
    CLOSED_NO_REPLY = "CLOSED_NO_REPLY"


class ReplyAction(models.Model):
    """One outward action, keyed by reply_key = SHA-256("reply|" + event_key + "|" + purpose)."""

    reply_key = models.CharField(max_length=64)
    event = models.ForeignKey(
        InboundEvent, to_field="event_key", db_column="event_key",
        on_delete=models.PROTECT, related_name="reply_actions",
    )
    purpose = models.CharField(max_length=64)
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

    class Meta:
        db_table = "reply_actions"
        ordering = ["-id"]
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

    def __str__(self) -> str:
        return f"{self.purpose} {self.reply_key[:12]}"


class ReplyTransition(TransitionRecord):
    action = models.ForeignKey(ReplyAction, on_delete=models.CASCADE, related_name="transitions")

    class Meta(TransitionRecord.Meta):
        db_table = "reply_action_transitions"
