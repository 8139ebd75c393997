"""The one seam to the platforms' stand-ins: loaded by dotted path from settings.CONDUIT_STAND_INS.

The canary serves the sandbox provider and the Graph API simulator for its
run, and the acceptance checks (and their command) act through the testkit's
test client and planted faults. They reach all of it here, by name, so no
module of the apps imports the stand-ins' package (tests/structure/
test_stand_ins.py fails on one that does); nothing is loaded until it is used.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string


def stand_in(name: str) -> Any:
    """`name` (e.g. "sandbox.serve") of the stand-ins' package, imported on first use."""
    return import_string(f"{settings.CONDUIT_STAND_INS}.{name}")


def sandbox_provider(**options: Any) -> Any:
    """A loopback sandbox provider, serving: (its server, its state)."""
    return stand_in("sandbox.serve")(**options)


def graph_simulator(**options: Any) -> Any:
    """A loopback Graph API simulator, serving (`.instagram_url`, `.state`, `.control()`, `.close()`)."""
    return stand_in("meta.serve")(**options)


class _Testkit:
    """The testkit's instruments and planted faults by attribute (`testkit.test_client`), each
    loaded on first use; the same name gives the same object every time."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return stand_in(f"testkit.{name}")
        except ImportError as exc:
            raise AttributeError(f"the stand-ins' testkit has no {name!r}: {exc}") from exc


testkit = _Testkit()
