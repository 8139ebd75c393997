"""The console: reads across the ledgers (ledger metrics, doctor, the front page's counts, the read API)."""
