"""The one seam to test-only machinery: planted faults, patched functions, DDL, Django's test
client, settings overrides and a captured log.

The apps reach it only through conduit.standins (the acceptance checks and the
`acceptance` command); tests import it directly. Each fault is a context
manager that plants it for its block and takes it back after; the
constraint-dropping one relies on the caller's transaction.
"""

from simulators.testkit.clients import (
    callback_recorder,
    captured_logs,
    commits_run,
    console_held,
    environ_set,
    nothing_queued,
    patched,
    patched_item,
    send_leases_expired,
    test_client,
    transport_timeout,
)
from simulators.testkit.planted import (
    approval_check_bypassed,
    canary_aimed_at_live_transport,
    canary_ids_fixed,
    meta_signature_bypassed,
    meta_throttling_taken_as_ambiguous,
    meta_timeout_taken_as_not_sent,
    reconcile_minting_reply_keys,
    whatsapp_statuses_unheard,
    whatsapp_throttling_taken_as_ambiguous,
    without_event_uniqueness,
)
from simulators.testkit.scenes import action_due_now, send_budget_unpaused, source_connected_ago

__all__ = [
    "action_due_now",
    "send_budget_unpaused",
    "source_connected_ago",
    "approval_check_bypassed",
    "canary_aimed_at_live_transport",
    "canary_ids_fixed",
    "callback_recorder",
    "captured_logs",
    "commits_run",
    "console_held",
    "environ_set",
    "meta_signature_bypassed",
    "meta_throttling_taken_as_ambiguous",
    "meta_timeout_taken_as_not_sent",
    "nothing_queued",
    "patched",
    "patched_item",
    "reconcile_minting_reply_keys",
    "send_leases_expired",
    "test_client",
    "transport_timeout",
    "whatsapp_statuses_unheard",
    "whatsapp_throttling_taken_as_ambiguous",
    "without_event_uniqueness",
]
