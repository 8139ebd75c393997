"""WhatsApp's proof pieces: its WhatsApp-shaped canary and its acceptance rows."""


def register() -> None:
    from platforms.whatsapp.canary import WHATSAPP
    from reconcile.proof.platforms import acceptance_rows_register, canary_platform_register

    canary_platform_register(WHATSAPP.name, WHATSAPP)
    acceptance_rows_register(acceptance_rows)


def acceptance_rows() -> tuple[list, list]:
    """WhatsApp's acceptance rows and their controls (loaded with the acceptance table: the testkit)."""
    from conduit.standins import testkit
    from platforms.whatsapp.acceptance import WhatsAppHarness
    from platforms.whatsapp.checks import (
        whatsapp_ambiguous_send,
        whatsapp_approval_gate,
        whatsapp_event_identity,
        whatsapp_safe_retry,
        whatsapp_source_proof,
    )
    from reconcile.proof.acceptance.table import Control, Row

    rows = [
        Row(
            "WhatsApp source proof",
            "A WhatsApp body with an invalid X-Hub-Signature-256 enters QUARANTINED and creates zero reply actions",
            whatsapp_source_proof,
            harness=WhatsAppHarness,
        ),
        Row(
            "WhatsApp event identity",
            "The same WhatsApp body twice, and a retry batched differently, leave one event row per wamid",
            whatsapp_event_identity,
            harness=WhatsAppHarness,
        ),
        Row(
            "WhatsApp approval gate",
            "An action in REVIEW_PENDING produces zero Cloud API sends",
            whatsapp_approval_gate,
            harness=WhatsAppHarness,
        ),
        Row(
            "WhatsApp safe retry",
            "WhatsApp's throughput answer (130429, not applied) then a success leaves one message at the "
            "simulator under the same reply key",
            whatsapp_safe_retry,
            harness=WhatsAppHarness,
        ),
        Row(
            "WhatsApp ambiguous send",
            "A message the simulator applied without answering enters SEND_STATUS_UNKNOWN, is never "
            "retried, and is settled SENT by the statuses carrying its reply key, applied exactly once",
            whatsapp_ambiguous_send,
            harness=WhatsAppHarness,
        ),
    ]
    controls = [
        Control("WhatsApp source proof", "Meta's signature check bypassed", testkit.meta_signature_bypassed),
        Control(
            "WhatsApp event identity",
            "the event uniqueness rule disabled",
            testkit.without_event_uniqueness,
        ),
        Control("WhatsApp approval gate", "the approval check bypassed", testkit.approval_check_bypassed),
        Control(
            "WhatsApp safe retry",
            "WhatsApp's throttling answer taken as ambiguous",
            testkit.whatsapp_throttling_taken_as_ambiguous,
        ),
        Control(
            "WhatsApp ambiguous send",
            "a timeout after the request taken as not sent",
            testkit.meta_timeout_taken_as_not_sent,
        ),
        Control(
            "WhatsApp ambiguous send",
            "the statuses not heard as receipts",
            testkit.whatsapp_statuses_unheard,
        ),
    ]
    return rows, controls
