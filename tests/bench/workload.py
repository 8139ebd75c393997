"""The deliveries the ingest benchmarks send: synthetic comments, half of them repeats (no Django)."""

from __future__ import annotations

ACCOUNT = "acct_test_bench"


def event_doc(event_id: str) -> dict:
    return {
        "id": event_id,
        "type": "comment.created",
        "post_id": "post_test_bench",
        "comment_id": f"msg_{event_id}",
        "from_id": "person_test_bench",
        "created_at": "2026-01-15T14:30:00Z",
        "text": "CHECKLIST",
    }


def workload(level: str, client: int, batch: int = 1):
    """Yield bodies' event lists.

    One event per body: new, a duplicate of it, new, duplicate, ... (half the
    deliveries duplicates). A batch of N: two thirds new events and a third
    duplicates of events this client sent in its previous body.
    """
    seq = 0
    if batch == 1:
        while True:
            doc = event_doc(f"evt_test_{level}_{client}_{seq}")
            yield [doc]
            yield [doc]
            seq += 1
    fresh = batch - batch // 3
    previous: list[dict] = []
    while True:
        docs = [event_doc(f"evt_test_{level}_{client}_{seq + i}") for i in range(fresh)]
        seq += fresh
        again = previous[: batch - fresh] or [
            event_doc(f"evt_test_{level}_{client}_{seq + i}") for i in range(batch - fresh)
        ]
        if not previous:
            seq += batch - fresh
        previous = docs
        yield docs + again
