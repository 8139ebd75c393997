"""The platforms app: each platform package registers its proof pieces into reconcile's registries."""

from django.apps import AppConfig


class PlatformsConfig(AppConfig):
    name = "platforms"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The order is the report's and the acceptance table's: the sandbox, Meta, then WhatsApp.
        from platforms import meta, sandbox, whatsapp

        sandbox.register()
        meta.register()
        whatsapp.register()
