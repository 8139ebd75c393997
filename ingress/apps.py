"""App configuration for ingress."""

from django.apps import AppConfig


class IngressConfig(AppConfig):
    name = "ingress"
    verbose_name = "Ingress"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from conduit.prepared import recovering_cursors

        connection_created.connect(recovering_cursors, dispatch_uid="conduit.prepared.recovering_cursors")
