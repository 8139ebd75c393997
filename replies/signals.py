"""Signals replies sends to the apps built on it (which it must not import)."""

from django.dispatch import Signal

# A person resolved a reply action (confirm sent, authorize a retry, retry now, close). Sent inside
# the transaction of the move, only when it applied, so what a receiver records commits or rolls
# back with it: action_id, how (confirm_sent | authorize_retry | retry_now | close), actor,
# reason (the person's words, or what the queue says on their behalf) and result (what happened).
person_resolved = Signal()
