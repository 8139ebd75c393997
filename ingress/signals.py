"""Signals ingress sends to the apps built on it (which it must not import)."""

from django.dispatch import Signal

# A person marked an authenticated quarantine receipt corrected: what its body
# held should be recovered from the source. Sent on commit with source_id and actor.
quarantine_corrected = Signal()

# The account's own items (a message echo, its own comment) were recorded: evidence that may show
# a reply Conduit sent. Sent on commit with source_id and items (dicts: kind, provider_id,
# parent_ref, correlation).
self_authored_seen = Signal()

# The platform reported what became of messages the account sent (WhatsApp's statuses): evidence
# that settles the reply that sent each. Sent on commit with source_id and items (dicts:
# provider_id, status, correlation, error_code).
message_statuses_seen = Signal()

# A person reviewed a quarantine receipt (dismissed or corrected). Sent inside the review's
# transaction, so what a receiver records commits or rolls back with it: receipt_id (str),
# source_id, outcome (DISMISSED | CORRECTED), actor, note, at.
quarantine_reviewed = Signal()

# An owner connected an account through its login flow (a new source, or an existing one
# reconnected). Sent inside the connect's transaction, so what a receiver declares (replies: the
# adapter's default routes) commits with the source: source_id, created.
source_connected = Signal()
