"""Reconcile runs, findings, reports, repairs and the replay-decision engine."""
