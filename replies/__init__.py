"""Reply purposes, the reply-action ledger, send attempts, the approval queue and the sender."""
