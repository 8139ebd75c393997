"""The sandbox platform's proof pieces: its canary (the default), the harness the acceptance
table's core rows act through, and its field map."""


def register() -> None:
    from platforms.sandbox.canary import SANDBOX
    from platforms.sandbox.field_map import field_map
    from reconcile.proof.platforms import (
        acceptance_harness_register,
        canary_platform_register,
        field_maps_register,
    )

    canary_platform_register(SANDBOX.name, SANDBOX, default=True)
    field_maps_register("field_map", field_map)
    acceptance_harness_register(acceptance_harness)


def acceptance_harness() -> type:
    """The harness class (loaded with the acceptance checks: it reaches the testkit)."""
    from platforms.sandbox.acceptance import Harness

    return Harness
