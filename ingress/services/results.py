"""What ingest answers: a result per member and per body, a refused proof, the ingest actor."""

from __future__ import annotations

from dataclasses import dataclass, field

from conduit.providers.base import ProofError

INGEST_ACTOR = "system:ingest"


@dataclass(frozen=True)
class EventResult:
    index: int | None
    result: str  # accepted | duplicate | quarantined | rolled_back (a refused batch's valid member)
    event_key: str = ""
    receipt_id: str = ""
    reason_code: str = ""


@dataclass
class IngestResult:
    delivery_id: str
    results: list[EventResult] = field(default_factory=list)
    # True when nothing of the body was accepted (a refused batch or body).
    refused: bool = False

    @property
    def receipt_ids(self) -> list[str]:
        return list(dict.fromkeys(r.receipt_id for r in self.results if r.receipt_id))

    @property
    def quarantined(self) -> bool:
        return bool(self.receipt_ids)


class ProofRefused(Exception):
    """Proof failed; a quarantine receipt was committed before this was raised."""

    def __init__(self, error: ProofError, receipt_id: str, coalesced: bool = False) -> None:
        super().__init__(error.detail)
        self.code = error.code
        self.detail = error.detail
        self.receipt_id = receipt_id
        # True when this failure was counted against the minute's first receipt of its kind.
        self.coalesced = coalesced
