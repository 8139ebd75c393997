"""Meta's proof pieces: its Meta-shaped canary, its acceptance rows and its field maps."""


def register() -> None:
    from platforms.meta.canary import META
    from platforms.meta.field_maps import meta_field_maps
    from reconcile.proof.platforms import (
        acceptance_rows_register,
        canary_platform_register,
        field_maps_register,
    )

    canary_platform_register(META.name, META)
    field_maps_register("meta_field_maps", meta_field_maps)
    acceptance_rows_register(acceptance_rows)


def acceptance_rows() -> tuple[list, list]:
    """Meta's acceptance rows and their controls (loaded with the acceptance table: the testkit)."""
    from conduit.standins import testkit
    from platforms.meta.acceptance import MetaHarness
    from platforms.meta.checks import (
        meta_ambiguous_send,
        meta_approval_gate,
        meta_event_identity,
        meta_reconciliation,
        meta_safe_retry,
        meta_source_proof,
    )
    from reconcile.proof.acceptance.table import Control, Row

    rows = [
        # The same promises for Meta's platforms, through Meta's proof, field maps and Graph read-back.
        Row(
            "Meta source proof",
            "A Meta body with an invalid X-Hub-Signature-256 enters QUARANTINED and creates zero reply actions",
            meta_source_proof,
            harness=MetaHarness,
        ),
        Row(
            "Meta event identity",
            "The same Meta body twice, and a retry batched differently, leave one event row per comment",
            meta_event_identity,
            harness=MetaHarness,
        ),
        Row(
            "Meta reconciliation",
            "A comment whose webhook never came is recovered from the Graph API with one "
            "action per purpose, no identity conflict and no call off this host",
            meta_reconciliation,
            harness=MetaHarness,
        ),
        Row(
            "Meta approval gate",
            "An action in REVIEW_PENDING produces zero Graph writes through the Meta transports",
            meta_approval_gate,
            harness=MetaHarness,
        ),
        Row(
            "Meta safe retry",
            "Meta's throttling answer (not applied) then a success leaves one reply at the "
            "simulator under the same reply key",
            meta_safe_retry,
            harness=MetaHarness,
        ),
        Row(
            "Meta ambiguous send",
            "A reply the simulator applied without answering (apply_then_timeout) enters "
            "SEND_STATUS_UNKNOWN, is never retried automatically, and is applied exactly once",
            meta_ambiguous_send,
            harness=MetaHarness,
        ),
    ]
    controls = [
        Control("Meta source proof", "Meta's signature check bypassed", testkit.meta_signature_bypassed),
        Control(
            "Meta event identity", "the event uniqueness rule disabled", testkit.without_event_uniqueness
        ),
        Control(
            "Meta reconciliation",
            "reconciliation changed to mint a new reply key",
            testkit.reconcile_minting_reply_keys,
        ),
        Control("Meta approval gate", "the approval check bypassed", testkit.approval_check_bypassed),
        Control(
            "Meta safe retry",
            "Meta's throttling answer taken as ambiguous",
            testkit.meta_throttling_taken_as_ambiguous,
        ),
        Control(
            "Meta ambiguous send",
            "a timeout after the request taken as not sent",
            testkit.meta_timeout_taken_as_not_sent,
        ),
    ]
    return rows, controls
