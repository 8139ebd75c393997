"""A poison batch accepts nothing (docs/concepts/event-contract.md#batches); reconciliation recovers its valid members once."""

from __future__ import annotations

import pytest

from ingress.models import InboundEvent, QuarantineReceipt
from ingress.services import quarantine_review
from reconcile.models import Finding, FindingKind, ScanState
from replies.models import ReplyAction
from tests.reconcile.conftest import body, item


def test_poison_batch_then_reconcile_records_the_valid_members_exactly_once(source_side, deliver, scan):
    """docs/concepts/event-contract.md#batches: "Any invalid member rolls back the entire batch,
    including canonical identity
    ownership." The valid members are not lost: the source still has them, and a complete scan
    recovers them as events the webhook never delivered."""
    state, source = source_side
    poison = item(3)
    poison.pop("post_id")
    state.hold_events(item(1), item(2), poison)

    response = deliver(body(item(1), item(2), poison))
    assert response.status_code == 202
    assert [r["result"] for r in response.json()["results"]] == ["rolled_back", "rolled_back", "quarantined"]
    assert InboundEvent.objects.count() == ReplyAction.objects.count() == 0

    outcome = scan(source)
    assert outcome.state == "published"
    assert sorted(InboundEvent.objects.values_list("source_event_id", "seen_count")) == [
        ("evt_test_000001", 1),
        ("evt_test_000002", 1),
    ]
    assert ReplyAction.objects.count() == 2 * len(source.purposes)
    assert set(ReplyAction.objects.values_list("delivery_state", flat=True)) == {"REVIEW_PENDING"}
    findings = Finding.objects.filter(report_id=outcome.report_id)
    assert findings.filter(kind=FindingKind.MISSING_LOCAL).count() == 2
    (invalid,) = findings.filter(kind=FindingKind.INVALID_SOURCE_ITEM)
    assert "item 2" in invalid.detail and "missing_identity" in invalid.detail

    # A redelivery of the same body is refused again and changes nothing recorded.
    assert deliver(body(item(1), item(2), poison)).status_code == 202
    assert sorted(InboundEvent.objects.values_list("seen_count", flat=True)) == [1, 1]


@pytest.mark.django_db(transaction=True)
def test_marking_an_authenticated_receipt_corrected_asks_for_a_reconcile(sandbox_source, client):
    from tests.conftest import sign

    poison = item(3)
    poison.pop("post_id")
    payload = body(item(1), poison)
    client.post("/webhooks/sandbox/", data=payload, content_type="application/json", headers=sign(payload))
    receipt = QuarantineReceipt.objects.get()
    outcome = quarantine_review(
        receipt_id=receipt.pk,
        outcome="CORRECTED",
        actor="reviewer_test",
        note="the provider fixed its field map",
    )
    assert outcome.applied
    state = ScanState.objects.get(source=sandbox_source)
    assert state.requested_by == "reviewer_test" and state.requested_at is not None
