"""The read API across the ledgers: events with their reply actions, quarantine, and the OpenAPI schema."""
