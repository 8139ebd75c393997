"""App configuration for reconcile."""

from django.apps import AppConfig


class ReconcileConfig(AppConfig):
    name = "reconcile"
    verbose_name = "Reconciliation"

    def ready(self) -> None:
        from ingress.signals import quarantine_corrected
        from reconcile.receivers import reconcile_after_correction

        quarantine_corrected.connect(reconcile_after_correction, dispatch_uid="reconcile_after_correction")

        from conduit.metrics import LEDGER_COLLECTORS
        from reconcile.metrics import LedgerCollector

        if not any(isinstance(c, LedgerCollector) for c in LEDGER_COLLECTORS):
            LEDGER_COLLECTORS.append(LedgerCollector())
