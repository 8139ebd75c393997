"""Signals ingress sends to the apps built on it (which it must not import)."""

from django.dispatch import Signal

# A person marked an authenticated quarantine receipt corrected: what its body
# held should be recovered from the source. Sent on commit with source_id and actor.
quarantine_corrected = Signal()

# The account's own items (a message echo, its own comment) were recorded: evidence that may show
# a reply Conduit sent. Sent on commit with source_id and items (dicts: kind, provider_id,
# parent_ref, correlation).
self_authored_seen = Signal()

# A person reviewed a quarantine receipt (dismissed or corrected). Sent inside the review's
# transaction, so what a receiver records commits or rolls back with it: receipt_id (str),
# source_id, outcome (DISMISSED | CORRECTED), actor, note, at.
quarantine_reviewed = Signal()
