"""Tests that run django-q2 on a real Redis."""
