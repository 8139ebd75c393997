"""Sources, the webhook endpoint, the canonical event ledger, delivery dedup and quarantine."""
