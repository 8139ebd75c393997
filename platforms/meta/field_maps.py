"""Meta's field maps for the acceptance report, read from the table its webhook module declares."""

from __future__ import annotations

import re

# The header of the field-map table in conduit.providers.meta.webhook's docstring, in its order.
META_MAP_COLUMNS = ("object.field", "item", "event type", "key", "refs")


def meta_field_maps() -> dict:
    """Meta's frozen field maps, read from the table conduit.providers.meta.webhook declares them in
    (its docstring; contract version CONTRACT_VERSION), with the declared families of each
    adapter that module holds (WhatsApp's map is its own: conduit.providers.whatsapp.webhook).

    Each row: the object and field (or item and verb) notified, the event type
    it becomes, how its key's id is made, and where each ref comes from.
    tests/acceptance holds every row to what the adapters make of a fixture.
    """
    from conduit.providers.meta import webhook
    from conduit.providers.registry import ADAPTERS

    lines = [line.strip() for line in (webhook.__doc__ or "").splitlines() if line.strip().startswith("|")]
    if len(lines) < 3:
        raise ValueError("conduit.providers.meta.webhook no longer declares its field maps as a table")
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    key_head = header[3] if len(header) > 3 else ""
    if len(header) != len(META_MAP_COLUMNS) or [h.split(" (")[0] for h in header] != list(META_MAP_COLUMNS):
        raise ValueError(f"the Meta field-map table's columns changed: {header}")
    maps = []
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != len(META_MAP_COLUMNS):
            raise ValueError(f"a Meta field-map row does not have {len(META_MAP_COLUMNS)} cells: {line}")
        source, item, event_type, key, refs = cells
        maps.append(
            {
                "source": source,
                "item": item,
                "event_type": event_type,
                "event_id": key.strip("`"),
                "refs": _refs(refs, maps[-1]["refs"] if maps else {}),
            }
        )
    key_form = re.search(r"`([^`]+)`", key_head)
    return {
        "contract_version": webhook.CONTRACT_VERSION,
        "declared_in": "conduit/providers/meta/webhook.py",
        "key_form": key_form.group(1) if key_form else key_head,
        "maps": maps,
        "adapters": {
            name: {
                "object": cls.object,
                "families": [{"event_type": f.event_type, "recovery": f.recovery} for f in cls.families],
            }
            for name, cls in sorted(ADAPTERS.items())
            if issubclass(cls, webhook.MetaWebhookAdapter) and _declared_in(cls, webhook)
        },
    }


def _declared_in(cls: type, webhook) -> bool:
    """Whether the webhook class that names the object `cls` answers is one of `webhook`'s."""
    named = (c for c in cls.__mro__ if issubclass(c, webhook.MetaWebhookAdapter) and "object" in vars(c))
    return next(named).__module__ == webhook.__name__


def _refs(cell: str, above: dict[str, str]) -> dict[str, str]:
    """`conversation: media id; message: comment id; sender: from.id` as a dict; "as above" repeats
    the row above's."""
    if cell.strip() == "as above":
        return dict(above)
    refs = {}
    for part in cell.split(";"):
        name, _, value = part.partition(":")
        if not value:
            raise ValueError(f"a Meta field-map ref is not `name: source`: {part!r}")
        refs[f"{name.strip()}_ref"] = value.strip()
    return refs
