"""App configuration for ingress."""

from django.apps import AppConfig


class IngressConfig(AppConfig):
    name = "ingress"
    verbose_name = "Ingress"

    def ready(self) -> None:
        from django.core import checks
        from django.db.backends.signals import connection_created

        from ingress.checks import connect_simulator_loopback, credentials_readable

        checks.register(credentials_readable, "conduit")
        checks.register(connect_simulator_loopback, "conduit")

        from conduit.prepared import recovering_cursors

        connection_created.connect(recovering_cursors, dispatch_uid="conduit.prepared.recovering_cursors")
