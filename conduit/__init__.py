"""Conduit: durable records and human-approved replies for social comments and DMs."""
