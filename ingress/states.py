"""The ingress ledgers' states: stored values, and the words a person reads (conduit.labels has
what each means)."""

from django.db import models


class EventState(models.TextChoices):
    RECEIVED = "RECEIVED", "Received"
    RECORD_READY = "RECORD_READY", "Replies planned"
    CLOSED_NO_REPLY = "CLOSED_NO_REPLY", "Closed without reply"


class ReconcileStatus(models.TextChoices):
    UNRECONCILED = "UNRECONCILED", "Not yet checked against the platform"
    MATCHED = "MATCHED", "Checked: the platform shows it"
    SOURCE_UNVERIFIED = "SOURCE_UNVERIFIED", "Not shown by the platform"


class QuarantineState(models.TextChoices):
    QUARANTINED = "QUARANTINED", "Waiting for review"
    DISMISSED = "DISMISSED", "Dismissed"
    CORRECTED = "CORRECTED", "Corrected"
