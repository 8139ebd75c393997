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


def credential_name_refusal(name: str) -> str:
    """Why a source may not name the variable `name` for a credential, or "" when it may.

    A source names only variables the deployment declared for credentials: names starting
    with one of CONDUIT_CREDENTIAL_PREFIXES (CONDUIT_SOURCE_ unless set), and never one of
    the server's own settings (SECRET_KEY, DATABASE_URL, CONDUIT_METRICS_TOKEN, ...), whatever
    the prefixes: a source's credential is sent to its platform.
    """
    from django.conf import settings

    if name in settings.CONDUIT_SERVER_VARIABLES:
        return f"{name} is one of the server's own settings, never a source's credential"
    prefixes = settings.CONDUIT_CREDENTIAL_PREFIXES
    if not name.startswith(prefixes):
        return (
            f"{name} is not a credential variable: a source names variables starting with "
            f"{' or '.join(prefixes) or '(no prefix declared)'} (CONDUIT_CREDENTIAL_PREFIXES)"
        )
    return ""


def secret_read(name: str) -> str:
    """The secret named `name`: one this process holds, else the environment variable; "" if
    neither, or if `name` is not a credential variable (credential_name_refusal), so that a
    source written before the rule cannot read a server setting either."""
    if credential_name_refusal(name):
        return ""
    with _lock:
        held = _held.get(name)
    return held if held else os.environ.get(name, "")
