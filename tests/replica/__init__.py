"""Tests against a real streaming replica of the test PostgreSQL."""
