"""Secrets this process holds for a while, read before the environment.

The canary signs its fixture with a key made for one run; holding it here
(not in `os.environ`) keeps it out of the environment that child processes
inherit, and gone when the run ends.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Iterator

_lock = threading.Lock()
_held: dict[str, str] = {}


@contextlib.contextmanager
def secret_held(name: str, value: str) -> Iterator[None]:
    """Hold `value` as the secret named `name` (an environment variable's name) for the block."""
    missing = object()
    with _lock:
        previous = _held.get(name, missing)
        _held[name] = value
    try:
        yield
    finally:
        with _lock:
            if previous is missing:
                _held.pop(name, None)
            else:
                _held[name] = previous


def secret_read(name: str) -> str:
    """The secret named `name`: one this process holds, else the environment variable; "" if neither."""
    with _lock:
        held = _held.get(name)
    return held if held else os.environ.get(name, "")
