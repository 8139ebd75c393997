"""The sandbox platform's field map for the acceptance report."""

from __future__ import annotations


def field_map() -> dict:
    """The sandbox-social field map, as its adapter module declares it (the map it parses with)."""
    from conduit.providers.sandbox import webhook as sandbox_social

    return {
        "map": dict(sandbox_social.FIELD_MAP),
        "required": list(sandbox_social.REQUIRED),
        "optional": list(sandbox_social.OPTIONAL),
    }
