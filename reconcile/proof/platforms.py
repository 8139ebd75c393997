"""What each platform package registers for the proof: its canary platform, its acceptance rows
(and the harness the table's core rows act through) and its field maps.

reconcile iterates what is registered here and never imports a platform; each
platform package registers its pieces when the `platforms` app is ready.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Protocol


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


# The acceptance pieces are registered as loaders: they reach the testkit (conduit.standins), which
# a process loads only when it runs the acceptance checks, never at start-up.
_HARNESS: list[Callable[[], Callable[..., Any]]] = []
_ROW_LOADERS: list[Callable[[], tuple[list, list]]] = []


def acceptance_harness_register(load: Callable[[], Callable[..., Any]]) -> None:
    """Register what loads the harness the acceptance table's core rows act through."""
    _HARNESS[:] = [load]


def acceptance_harness() -> Callable[..., Any]:
    """The harness class the core rows act through (its fixtures are class attributes)."""
    if not _HARNESS:
        raise LookupError("no platform registered the acceptance harness")
    return _HARNESS[0]()


def acceptance_rows_register(load: Callable[[], tuple[list, list]]) -> None:
    """Register what loads a platform's acceptance rows and their controls, appended after the
    core rows (in the order registered) when the table is first imported."""
    if load not in _ROW_LOADERS:
        _ROW_LOADERS.append(load)


def acceptance_rows() -> tuple[list, list]:
    """Every registered platform's (rows, controls), loaded now, in the order registered."""
    rows: list = []
    controls: list = []
    for load in _ROW_LOADERS:
        more_rows, more_controls = load()
        rows += more_rows
        controls += more_controls
    return rows, controls
