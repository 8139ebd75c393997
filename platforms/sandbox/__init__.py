"""The sandbox platform's proof pieces: its canary (the default) and its field map."""


def register() -> None:
    from platforms.sandbox.canary import SANDBOX
    from platforms.sandbox.field_map import field_map
    from reconcile.proof.platforms import canary_platform_register, field_maps_register

    canary_platform_register(SANDBOX.name, SANDBOX, default=True)
    field_maps_register("field_map", field_map)
