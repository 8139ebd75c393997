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

        from ingress.signals import quarantine_reviewed
        from reconcile.services import decision_record_resolution, decision_record_review
        from replies.signals import person_resolved

        # A person's decision in any queue lands on the findings it decides, in its own transaction
        # (docs/concepts/reconciliation.md#decisions).
        person_resolved.connect(
            decision_record_resolution, dispatch_uid="reconcile.decision_record_resolution"
        )
        quarantine_reviewed.connect(decision_record_review, dispatch_uid="reconcile.decision_record_review")

        from reconcile.selectors import live_route_gate
        from replies.hooks import live_send_gate_register

        # A reply route goes live only while the latest acceptance run passed on this code version
        # (docs/concepts/acceptance.md#live): replies asks this gate, never reads acceptance runs.
        live_send_gate_register(live_route_gate)
