"""Meta's proof pieces: its Meta-shaped canary and its field maps."""


def register() -> None:
    from platforms.meta.canary import META
    from platforms.meta.field_maps import meta_field_maps
    from reconcile.proof.platforms import canary_platform_register, field_maps_register

    canary_platform_register(META.name, META)
    field_maps_register("meta_field_maps", meta_field_maps)
