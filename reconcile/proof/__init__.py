"""Proof that the whole path holds: the non-delivery canary (docs/concepts/canary.md) and the
acceptance checks (docs/concepts/acceptance.md#checks)."""
