"""App configuration for reconcile."""

from django.apps import AppConfig


class ReconcileConfig(AppConfig):
    name = "reconcile"
    verbose_name = "Reconciliation"

    def ready(self) -> None:
        from django.core import checks

        from conduit.checks import settings_in_range

        # Every ranged setting is checked at start (manage.py check, runserver, migrate, qcluster).
        checks.register(settings_in_range, "conduit")

        from ingress.admin import SOURCE_INSPECTIONS
        from reconcile.selectors import source_inspection

        # The source's admin page shows the inspection (docs/concepts/reconciliation.md#inspection)
        # beside the declared families.
        if source_inspection not in SOURCE_INSPECTIONS:
            SOURCE_INSPECTIONS.append(source_inspection)

        from ingress.signals import quarantine_corrected
        from reconcile.receivers import reconcile_after_correction

        quarantine_corrected.connect(reconcile_after_correction, dispatch_uid="reconcile_after_correction")
