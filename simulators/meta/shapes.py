"""Ids, times and `fields` values in Meta's shapes (as recorded), minted and parsed."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
from datetime import datetime, timezone


def _whole_seconds() -> float:
    """Now, as Meta keeps an object's time: whole seconds."""
    return float(int(time.time()))


def _hash_digits(seed: str, count: int) -> str:
    """`count` decimal digits drawn from a hash of `seed` (stable: the same seed, the same digits)."""
    value = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")
    return str(value % 10**count).rjust(count, "0")


def _z_escaped(text: str) -> str:
    """Meta's id escaping of base64: "Z" becomes "ZA" and padding "=" becomes "ZD" (recorded ids)."""
    return base64.b64encode(text.encode()).decode().replace("Z", "ZA").replace("=", "ZD")


# Every recorded Instagram thread number (39 digits) starts so.
IG_THREAD_PREFIX = "34028236684171030"


def ig_thread(account: str, person: str) -> str:
    return IG_THREAD_PREFIX + _hash_digits(f"thread:{account}:{person}", 39 - len(IG_THREAD_PREFIX))


def conversation_id(account: str, person: str, object: str = "page") -> str:
    """The account's conversation with a person, one per pair: Messenger `t_<15 digits>`, Instagram
    the Z-escaped base64 of `ig_dm:1:IGMessageThread:<ig-id>:<thread>` (110 characters for a 17-digit id)."""
    if object == "instagram":
        return _z_escaped(f"ig_dm:1:IGMessageThread:{account}:{ig_thread(account, person)}")
    first = str(1 + int(_hash_digits(f"t:{account}:{person}", 15)) % 9)  # no leading zero
    return "t_" + first + _hash_digits(f"t2:{account}:{person}", 14)


def message_id(object: str, account: str, person: str, created_ms: int, seq: int) -> str:
    """A message id as Meta mints them. Instagram: the Z-escaped base64 of `ig_dm_item:1:IGMessageID:
    <ig-id>:<thread>:<35-digit number growing with time>`, `aWdf...`, 164 characters for a 17-digit
    account id (recorded: webhooks' `mid`, the send answer's `message_id`, the Conversations API's
    message ids). Messenger: `m_` and 86 base64url characters (88 in all, as recorded)."""
    if object == "instagram":
        number = str(3 * 10**34 + created_ms * 10**9 + seq % 10**9)
        return _z_escaped(f"ig_dm_item:1:IGMessageID:{account}:{ig_thread(account, person)}:{number}")
    return "m_" + base64.urlsafe_b64encode(secrets.token_bytes(66)).decode()[:86]


def field_tree(fields: str) -> dict[str, tuple[str | None, dict[str, str]]]:
    """A `fields` value as {name: (subfields or None, options)}:
    "id,from{id,username},messages.limit(5){id}" -> {"id": (None, {}), "from": ("id,username", {}),
    "messages": ("id", {"limit": "5"})}."""
    parts, depth, current = [], 0, ""
    for char in fields:
        if char in "{(":
            depth += 1
        elif char in "})":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    tree: dict[str, tuple[str | None, dict[str, str]]] = {}
    for part in (p.strip() for p in parts):
        if not part:
            continue
        sub = None
        if part.endswith("}") and "{" in part:
            part, sub = part[: part.index("{")], part[part.index("{") + 1 : -1]
        name, *options = part.split(".")
        opts = {m.group(1): m.group(2) for o in options if (m := re.fullmatch(r"(\w+)\((.*)\)", o))}
        tree[name.strip()] = (sub, opts)
    return tree


def iso(at: float) -> str:
    """Graph's timestamp form: 2026-11-30T10:00:00+0000."""
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+0000")


def parse_time(value: str) -> float:
    """Unix seconds, or an ISO date/time (Meta accepts strtotime values; ISO is our subset)."""
    try:
        return float(value)
    except ValueError:
        at = datetime.fromisoformat(value.replace("+0000", "+00:00").replace("Z", "+00:00"))
        return (at if at.tzinfo else at.replace(tzinfo=timezone.utc)).timestamp()


def top_fields(fields: str) -> set[str]:
    """Top-level names of a `fields` value: "id,from{id,username},replies{id}" -> {id, from, replies}."""
    return set(field_tree(fields))


def _shortcode(media_id: str) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    digest = hashlib.sha256(media_id.encode()).digest()
    return "".join(alphabet[b % 64] for b in digest[:11])
