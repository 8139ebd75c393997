"""A Meta webhook body split by entry: each entry's account and its items in the normalizer's shape.

Meta's documented bounds on a body live here too: how many updates it holds and the largest
body Meta may send (the default of the Meta endpoint's body limit).
"""

from __future__ import annotations

from dataclasses import dataclass

from conduit.providers.base import Rejection, strict_json

# Meta's documented bound on one body.
MAX_UPDATES_PER_BODY = 1000
# The largest body Meta may send, from its documented bounds: 1,000 updates, each at most the
# longest comment (a Facebook comment: 8,000 characters; an Instagram one: 2,200) with every
# character at its longest on the wire (Meta sends non-ASCII as a 6-byte \uXXXX escape), plus
# what else an update carries (ids, author, times, attachment links, keys and punctuation).
# 1,000 x (8,000 x 6 + 4,096) = 52,096,000 bytes (about 50 MiB). The default of the Meta
# endpoint's body limit (settings.CONDUIT_META_WEBHOOK_MAX_BYTES): a body Meta may send must
# not be answered 413, which Meta retries for 36 hours and, past about an hour of failures,
# may answer by unsubscribing the app.
MAX_COMMENT_CHARACTERS = 8000
ESCAPED_CHARACTER_BYTES = 6
UPDATE_ENVELOPE_BYTES = 4096
MAX_BODY_BYTES = MAX_UPDATES_PER_BODY * (
    MAX_COMMENT_CHARACTERS * ESCAPED_CHARACTER_BYTES + UPDATE_ENVELOPE_BYTES
)


@dataclass(frozen=True)
class Entry:
    """One entry of a body: the account it is for and its items in the normalizer's shape."""

    index: int
    account: str
    items: list[dict]


@dataclass(frozen=True)
class MetaBody:
    object: str
    entries: list[Entry]


WHATSAPP_OBJECT = "whatsapp_business_account"


def _whatsapp_entries(index: int, business: str, changes: list) -> list[Entry] | Rejection:
    """A WhatsApp entry is the business account's; its changes are each phone number's, named
    by `value.metadata.phone_number_id`, the account a source is for. Each message and each status
    of a change is one item; a change naming no number stays the business account's (a source
    owns no such account, so it meets a receipt rather than vanishing)."""
    by_account: dict[str, list[dict]] = {}
    for change in changes:
        if not isinstance(change, dict):
            return Rejection(None, "invalid_body", "each change must be an object")
        field = change.get("field") if isinstance(change.get("field"), str) else ""
        value = change.get("value")
        metadata = value.get("metadata") if isinstance(value, dict) else None
        number = metadata.get("phone_number_id") if isinstance(metadata, dict) else None
        if not isinstance(number, str) or not number.strip() or not number.isprintable() or len(number) > 200:
            by_account.setdefault(business, []).append(
                {"object": WHATSAPP_OBJECT, "field": field, "kind": "change", "value": value}
            )
            continue
        contacts = value.get("contacts") if isinstance(value.get("contacts"), list) else []
        items = by_account.setdefault(number, [])
        for kind, key in (("message", "messages"), ("status", "statuses")):
            listed = value.get(key, [])
            if not isinstance(listed, list):
                return Rejection(None, "invalid_body", f"{key} must be a list")
            items += [
                {"object": WHATSAPP_OBJECT, "field": field, "kind": kind, "value": item, "contacts": contacts}
                for item in listed
            ]
        if not value.get("messages") and not value.get("statuses"):
            items.append({"object": WHATSAPP_OBJECT, "field": field, "kind": "change", "value": value})
    return [Entry(index, account, items) for account, items in by_account.items()]


def body_split(body: bytes) -> MetaBody | Rejection:
    """The body's object and entries, or why it cannot be read (a refusal of the whole body)."""
    try:
        document = strict_json(body)
    except (ValueError, RecursionError):
        return Rejection(None, "unparsable_body", "the body is not UTF-8 JSON")
    if (
        not isinstance(document, dict)
        or not isinstance(document.get("object"), str)
        or not isinstance(document.get("entry"), list)
    ):
        return Rejection(None, "invalid_body", "expected an object with `object` and an `entry` list")
    entries: list[Entry] = []
    updates = 0
    for index, entry in enumerate(document["entry"]):
        if not isinstance(entry, dict):
            return Rejection(None, "invalid_body", "each entry must be an object")
        account = entry.get("id")
        if isinstance(account, int) and not isinstance(account, bool):
            account = str(account)
        if (
            not isinstance(account, str)
            or not account.strip()
            or not account.isprintable()
            or len(account) > 200
        ):
            return Rejection(None, "missing_identity", "each entry needs its account id")
        entry_time = entry.get("time")
        if not isinstance(entry_time, int) or isinstance(entry_time, bool):
            entry_time = None
        changes = entry.get("changes") or []
        if not isinstance(changes, list):
            return Rejection(None, "invalid_body", "changes must be a list")
        if document["object"] == WHATSAPP_OBJECT:
            split = _whatsapp_entries(index, account, changes)
            if isinstance(split, Rejection):
                return split
            updates += sum(len(e.items) for e in split)
            entries += split
            continue
        items: list[dict] = []
        for change in changes:
            if not isinstance(change, dict):
                return Rejection(None, "invalid_body", "each change must be an object")
            field = change.get("field")
            items.append(
                {
                    "object": document["object"],
                    "field": field if isinstance(field, str) else "",
                    "value": change.get("value"),
                    "entry_time": entry_time,
                    "read": False,
                }
            )
        for field in ("messaging", "standby"):
            events = entry.get(field) or []
            if not isinstance(events, list):
                return Rejection(None, "invalid_body", f"{field} must be a list")
            items += [
                {
                    "object": document["object"],
                    "field": field,
                    "value": event,
                    "entry_time": entry_time,
                    "read": False,
                }
                for event in events
            ]
        updates += len(items)
        entries.append(Entry(index, account, items))
    if not entries or updates > MAX_UPDATES_PER_BODY:
        return Rejection(None, "invalid_body", f"a body holds 1 to {MAX_UPDATES_PER_BODY} updates")
    return MetaBody(document["object"], entries)
