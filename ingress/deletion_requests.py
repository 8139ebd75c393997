"""The data deletion requests a platform relayed: what was asked, what was done, and the code its
status page answers to."""

from django.db import models
from django.db.models import Q


class DeletionStatus(models.TextChoices):
    # Done in the request's own transaction: nothing is left pending.
    COMPLETED = "COMPLETED"


class DeletionRequest(models.Model):
    """One signed data deletion request (a platform retries: the same request is this one row).

    Neither the request nor the person's id is kept: `request_digest` is the SHA-256 of the signed
    value (what makes a retry the same request) and `user_digest` that of the person's id.
    """

    confirmation_code = models.CharField(max_length=32, editable=False)
    request_digest = models.CharField(max_length=64, editable=False)
    user_digest = models.CharField(max_length=64, editable=False)
    app_id = models.CharField(max_length=32, editable=False)
    issued_at = models.DateTimeField(editable=False)
    received_at = models.DateTimeField(editable=False)
    status = models.CharField(max_length=16, choices=DeletionStatus.choices, editable=False)
    events_blanked = models.PositiveIntegerField(default=0, editable=False)
    sources_disconnected = models.PositiveIntegerField(default=0, editable=False)
    completed_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        app_label = "ingress"
        db_table = "ingress_deletion_requests"
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["confirmation_code"], name="deletion_confirmation_code_unique"),
            models.UniqueConstraint(fields=["request_digest"], name="deletion_request_digest_unique"),
            models.CheckConstraint(
                condition=Q(status__in=DeletionStatus.values), name="deletion_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(confirmation_code__regex=r"^[A-Za-z0-9_-]{16,32}$"), name="deletion_code_shape"
            ),
            models.CheckConstraint(
                condition=Q(request_digest__regex=r"^[0-9a-f]{64}$")
                & Q(user_digest__regex=r"^[0-9a-f]{64}$"),
                name="deletion_digests_are_sha256",
            ),
            # Completed means a completion time, and the other way round.
            models.CheckConstraint(
                condition=Q(status=DeletionStatus.COMPLETED, completed_at__isnull=False),
                name="deletion_completed_at",
            ),
        ]

    def __str__(self) -> str:
        return self.confirmation_code
