"""doctor: what needs a person, across the ledgers."""
