"""What reconciliation does when ingress reports something (signal receivers)."""

from __future__ import annotations

from ingress.models import Source


def reconcile_after_correction(*, source_id: int, actor: str, **_: object) -> None:
    """A corrected quarantine receipt asks for a reconcile of its source
    (docs/concepts/event-contract.md#batches)."""
    from reconcile.services import reconcile_request

    source = Source.objects.filter(pk=source_id).first()
    if source is not None:
        reconcile_request(source=source, actor=actor)
