"""Proof that the whole path holds: the non-delivery canary and seed 000's acceptance checks."""
