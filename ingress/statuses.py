"""The message-status ledger: what the platform reported of each message the account sent
(WhatsApp's `statuses[]`), kept as receipt evidence for the reply that sent it, never as an event.

One row per (source, message id, status): a status delivered again counts on its row. A `failed`
status of a message the platform accepted waits for a person (reviewed_at) in the admin's
"Sent replies WhatsApp could not deliver".
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from ingress.models import Source


class MessageStatus(models.Model):
    """One status the platform reported of a message the account sent."""

    source = models.ForeignKey(Source, on_delete=models.PROTECT, related_name="+", db_index=False)
    provider_id = models.CharField(max_length=200, help_text="The message's id on the platform (a wamid).")
    status = models.CharField(max_length=32)
    correlation = models.CharField(
        max_length=512, blank=True, help_text="What the platform carried back: the reply key Conduit sent."
    )
    error_code = models.CharField(max_length=16, blank=True)
    occurred_at = models.DateTimeField()
    first_seen_at = models.DateTimeField()
    seen_count = models.PositiveIntegerField(default=1)
    # A failure a person has looked at (it leaves the failed-delivery queue).
    reviewed_at = models.DateTimeField(null=True, blank=True)
    reviewed_by = models.CharField(max_length=150, blank=True, db_default="")

    class Meta:
        db_table = "ingress_message_statuses"
        ordering = ["occurred_at", "id"]
        verbose_name_plural = "message statuses"
        constraints = [
            models.UniqueConstraint(fields=["source", "provider_id", "status"], name="message_status_unique"),
            models.CheckConstraint(condition=~Q(status=""), name="message_status_named"),
            models.CheckConstraint(
                condition=Q(reviewed_at__isnull=True) | ~Q(reviewed_by=""), name="message_status_reviewer"
            ),
        ]
        indexes = [
            # The failed-delivery queue: failures nobody has reviewed, oldest first.
            models.Index(
                fields=["occurred_at"],
                name="message_status_unreviewed",
                condition=Q(status="failed", reviewed_at__isnull=True),
            ),
            models.Index(fields=["correlation"], name="message_status_correlation"),
        ]

    def __str__(self) -> str:
        return f"{self.provider_id}:{self.status}"


class UndeliveredMessage(MessageStatus):
    """The queue of messages the platform accepted and then could not deliver, nobody has reviewed."""

    class Meta:
        proxy = True
        verbose_name = "sent message the platform could not deliver"
        verbose_name_plural = "sent messages the platform could not deliver"
        permissions = [
            ("review_undeliveredmessage", "Can mark a message the platform could not deliver reviewed")
        ]
