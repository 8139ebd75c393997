"""Test-only settings: Conduit's own, with the planted-error view routed."""

from conduit.settings import *  # noqa: F401,F403

ROOT_URLCONF = "tests.ops.planted"
