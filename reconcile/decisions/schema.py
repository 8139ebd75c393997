"""The replay-decision request schema (docs/concepts/replay-decisions.md#request), kept as data,
and its validator."""

from __future__ import annotations

import re
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker

_KEY = {"type": "string", "minLength": 1, "maxLength": 200}

REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["decision", "proposal"],
    "additionalProperties": False,
    "properties": {
        "decision": {"const": "replay"},
        "proposal": {
            "type": "object",
            "required": ["operation", "key", "digest"],
            "additionalProperties": False,
            "properties": {
                "operation": {"type": "string", "enum": ["apply", "deliver"]},
                "key": _KEY,
                "digest": _KEY,
                "kind": {"type": "string", "enum": ["event", "snapshot"]},
                "delta": {"type": "string", "format": "signed-decimal"},
            },
        },
        "events": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "digest", "kind", "delta"],
                "additionalProperties": False,
                "properties": {
                    "key": _KEY,
                    "digest": _KEY,
                    "kind": {"type": "string", "enum": ["opening", "event", "snapshot"]},
                    "delta": {"type": "string", "format": "signed-decimal"},
                },
            },
            "maxItems": 10000,
        },
        "destination": {
            "type": "object",
            "required": ["name", "mode", "dedupe"],
            "additionalProperties": False,
            "properties": {
                "name": _KEY,
                "mode": {"type": "string", "enum": ["event", "snapshot"]},
                "dedupe": {"type": "string", "enum": ["verified", "none"]},
            },
        },
        "attempts": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["transport"],
                "additionalProperties": False,
                "properties": {
                    "at": {"type": "string", "format": "date-time"},
                    "transport": {"type": "string", "enum": ["not_sent", "sent", "response_received"]},
                    "http_status": {"type": "integer", "minimum": 100, "maximum": 599},
                    "evidence": {"type": "string", "minLength": 1, "maxLength": 4000},
                },
            },
            "maxItems": 50,
        },
    },
}

_FORMATS = FormatChecker()  # date-time through rfc3339-validator


@_FORMATS.checks("signed-decimal")
def _signed_decimal(value: object) -> bool:
    return not isinstance(value, str) or re.fullmatch(r"[+-]?[0-9]+(\.[0-9]+)?", value) is not None


_VALIDATOR = Draft202012Validator(REQUEST_SCHEMA, format_checker=_FORMATS)


def violations(document: Any) -> list[dict[str, str]]:
    """Every schema violation, each with the JSON pointer of the offending field, in pointer order."""
    found = []
    for error in _VALIDATOR.iter_errors(document):
        pointer = "".join(
            "/" + str(part).replace("~", "~0").replace("/", "~1") for part in error.absolute_path
        )
        found.append({"pointer": pointer, "message": error.message[:300], "keyword": str(error.validator)})
    return sorted(found, key=lambda v: (v["pointer"], v["keyword"], v["message"]))
