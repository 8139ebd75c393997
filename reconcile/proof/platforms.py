"""What each platform package registers for the proof: its canary platform and its field maps.

reconcile iterates what is registered here and never imports a platform; each
platform package registers its pieces when the `platforms` app is ready.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from pathlib import Path
from typing import Callable, Protocol


class CanaryPlatform(Protocol):
    """What differs between canaries: the reserved source, its fixture, the transport its replies
    are routed to (never live), how a delivery is made, and the loopback copy reconciliation reads."""

    name: str
    registration: dict
    fixture: Path
    transport: str

    def fixture_time(self, document: dict) -> datetime: ...
    def for_run(self, document: dict, *, run_id: str, at: datetime) -> dict: ...
    def identifiers(self, document: dict) -> list[str]: ...
    def path(self, source) -> str: ...
    def headers(self, source, body: bytes, secret: str) -> dict[str, str]: ...
    def new_secret(self) -> str: ...
    def held_source(
        self, source, document: dict
    ) -> contextlib.AbstractContextManager[tuple[str, Callable[[], int]]]: ...


_CANARY: dict[str, CanaryPlatform] = {}
_CANARY_DEFAULT: list[str] = []
_FIELD_MAPS: dict[str, Callable[[], dict]] = {}


def canary_platform_register(name: str, platform: CanaryPlatform, *, default: bool = False) -> None:
    """Register a canary platform under `name` (the command's --platform choice)."""
    if name in _CANARY and _CANARY[name] is not platform:
        raise ValueError(f"canary platform {name!r} is registered already")
    _CANARY[name] = platform
    if default:
        _CANARY_DEFAULT[:] = [name]


def canary_platforms() -> dict[str, CanaryPlatform]:
    """The registered canary platforms, in the order they were registered."""
    return dict(_CANARY)


def canary_platform_default() -> str:
    """The platform the canary proves when none is named."""
    if not _CANARY_DEFAULT:
        raise LookupError("no canary platform is registered as the default")
    return _CANARY_DEFAULT[0]


def canary_platform(name: str | None = None) -> CanaryPlatform:
    """The canary platform registered under `name` (the default when None)."""
    return _CANARY[canary_platform_default() if name is None else name]


def field_maps_register(key: str, read: Callable[[], dict]) -> None:
    """Register a platform's field-map section of the acceptance report under `key`."""
    _FIELD_MAPS[key] = read


def field_maps() -> dict[str, dict]:
    """Every registered field-map section, read now, in the order registered."""
    return {key: read() for key, read in _FIELD_MAPS.items()}
