"""Acceptance checks report a server error as a failed check instead of raising it."""

import pytest
from django.test import Client


@pytest.fixture
def client() -> Client:
    return Client(raise_request_exception=False)
