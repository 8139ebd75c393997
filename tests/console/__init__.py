"""The back office console: front page, review queue, unknown sends, reports."""
