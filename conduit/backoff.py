"""The one retry schedule: exponential backoff from a base, doubling per failure, capped."""

from __future__ import annotations

BASE_SECONDS = 5
# 2 ** 30 times any base is past every cap in use; bounding the exponent keeps
# the arithmetic small however many failures have been counted.
_MAX_DOUBLINGS = 30


def backoff_delay(
    *, failures: int, cap: float, base: float = BASE_SECONDS, retry_after: float | None = None
) -> float:
    """Seconds to wait after the `failures`-th consecutive failure: base * 2**(failures-1), capped.

    The first failure (and a count of 0) waits `base`; each further one doubles
    it, never past `cap`. Deterministic: no jitter, so schedules are testable.
    A wait the provider asked for (`retry_after`) lengthens the delay, but never
    past `cap` either (docs/concepts/reconciliation.md#scheduling: the backoff is "capped by the interval").
    """
    doublings = min(max(0, failures - 1), _MAX_DOUBLINGS)
    delay = base * 2**doublings
    if retry_after:
        delay = max(delay, retry_after)
    return min(cap, delay)
