"""The sandbox-social webhook: Standard Webhooks proof, parsing, and the frozen sandbox field map."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any, Mapping

from conduit.canonical import payload_hash
from conduit.providers.base import (
    ANSWERS_COMMENT,
    COMPLETE,
    MAX_REF_LENGTH,
    Family,
    Observation,
    Parsed,
    Proof,
    ProofError,
    Rejection,
    SecretUnavailable,
    SourceAdapter,
    SourceConfig,
    handle_of,
    strict_json,
)
from conduit.providers.sandbox import standard_webhooks
from conduit.providers.sandbox.reader import SandboxReader

TOLERANCE = timedelta(minutes=5)
MAX_EVENTS_PER_BODY = 1000

# The frozen field map (docs/platforms/sandbox-social.md#field-map): payload field -> event contract field.
# Changing it is a new contract_version, never an edit in place.
FIELD_MAP: Mapping[str, str] = MappingProxyType(
    {
        "id": "source_event_id",
        "type": "event_type",
        "post_id": "conversation_ref",
        "comment_id": "message_ref",
        "from_id": "sender_ref",
        "created_at": "occurred_at",
    }
)
# Stable identity a payload must carry; `id` is optional (the hashed form of docs/concepts/keys.md#event-key).
REQUIRED = ("type", "post_id", "comment_id", "from_id", "created_at")
OPTIONAL = ("id",)


class SandboxSocialAdapter(SandboxReader, SourceAdapter):
    name = "sandbox-social"
    source_system = "sandbox-social"

    def undeclared_family(self, event_type: str) -> Family:
        # The sandbox provider keeps every event of whatever type a source allowlists, and every
        # receipt by reply key: each type is read back whole, and its replies answer it.
        return Family(event_type, COMPLETE, answers=ANSWERS_COMMENT)

    def verify(self, *, body: bytes, headers: Mapping[str, str], secret: str, now: datetime) -> Proof:
        try:
            key = standard_webhooks.secret_key(secret)
        except standard_webhooks.SecretInvalid as exc:
            raise SecretUnavailable(str(exc)) from None

        delivery_id = headers.get("webhook-id", "")
        timestamp = headers.get("webhook-timestamp", "")
        signature = headers.get("webhook-signature", "")
        if not (delivery_id and timestamp and signature):
            raise ProofError(
                "missing_proof_headers",
                "webhook-id, webhook-timestamp and webhook-signature are all required",
            )
        if len(delivery_id) > MAX_REF_LENGTH or not delivery_id.isprintable():
            raise ProofError("malformed_proof_headers", "webhook-id is too long or not printable")
        if not timestamp.isascii() or not timestamp.isdigit() or len(timestamp) > 12:
            raise ProofError("malformed_proof_headers", "webhook-timestamp must be integer seconds")
        try:
            sent_at = datetime.fromtimestamp(int(timestamp), tz=timezone.utc)
        except (ValueError, OverflowError, OSError):  # beyond the year 9999
            raise ProofError("malformed_proof_headers", "webhook-timestamp is out of range") from None
        if sent_at < now - TOLERANCE:
            raise ProofError("stale_timestamp", "webhook-timestamp is more than 5 minutes old")
        if sent_at > now + TOLERANCE:
            raise ProofError("future_timestamp", "webhook-timestamp is more than 5 minutes ahead")
        entries = standard_webhooks.well_formed_entries(signature)
        if not entries:
            raise ProofError("malformed_proof_headers", "webhook-signature holds no well-formed entry")
        # The proof covers the bytes exactly as received, whatever their encoding.
        if not standard_webhooks.matches(
            key=key, delivery_id=delivery_id, timestamp=timestamp, body=body, entries=entries
        ):
            raise ProofError("invalid_signature", "no signature matches the body")
        return Proof(delivery_id=delivery_id)

    def sign(self, *, body: bytes, secret: str, delivery_id: str, at: datetime) -> dict[str, str]:
        timestamp = str(int(at.timestamp()))
        return {
            "webhook-id": delivery_id,
            "webhook-timestamp": timestamp,
            "webhook-signature": standard_webhooks.signature(
                key=standard_webhooks.secret_key(secret),
                delivery_id=delivery_id,
                timestamp=timestamp,
                body=body,
            ),
        }

    def parse(self, *, body: bytes, config: SourceConfig) -> Parsed:
        try:
            document = strict_json(body)
        except (ValueError, RecursionError):
            # ValueError covers UnicodeDecodeError, duplicate keys and integers past
            # the interpreter's digit limit; RecursionError, nesting past its depth.
            return Parsed([], [Rejection(None, "unparsable_body", "the body is not UTF-8 JSON")])
        if not isinstance(document, dict) or not isinstance(document.get("events"), list):
            return Parsed([], [Rejection(None, "invalid_body", "expected an object with an events list")])
        account = document.get("account")
        if not isinstance(account, str) or not account:
            return Parsed([], [Rejection(None, "missing_identity", "account is required")])
        if account != config.account_ref:
            return Parsed([], [Rejection(None, "account_mismatch", "account is not this source's account")])
        events = document["events"]
        if not events or len(events) > MAX_EVENTS_PER_BODY:
            return Parsed(
                [],
                [Rejection(None, "invalid_body", f"events must hold 1 to {MAX_EVENTS_PER_BODY} items")],
            )
        return self.normalize(events, account, config)

    def observe(self, index: int, item: Any, account: str, config: SourceConfig) -> Observation | Rejection:
        if not isinstance(item, dict):
            return Rejection(index, "invalid_body", "each event must be an object")
        values: dict[str, str] = {}
        for name in REQUIRED + OPTIONAL:
            value = item.get(name)
            if value is None:
                if name in REQUIRED:
                    return Rejection(index, "missing_identity", f"{name} is required")
                value = ""
            elif not isinstance(value, str) or not value.strip() or not value.isprintable():
                return Rejection(index, "invalid_identity", f"{name} must be a non-empty printable string")
            elif len(value) > MAX_REF_LENGTH:
                return Rejection(index, "invalid_identity", f"{name} exceeds {MAX_REF_LENGTH} characters")
            values[FIELD_MAP[name]] = value
        if values["event_type"] not in config.event_types:
            return Rejection(index, "event_type_not_allowed", "the event type is not allowlisted")
        try:
            occurred = datetime.fromisoformat(values["occurred_at"])
        except ValueError:
            return Rejection(index, "invalid_occurred_at", "created_at is not an ISO 8601 time")
        if occurred.tzinfo is None:
            return Rejection(index, "invalid_occurred_at", "created_at must carry a UTC offset")
        try:
            occurred = occurred.astimezone(timezone.utc)
        except OverflowError:  # 0001-01-01 east of UTC, 9999-12-31 west of it
            return Rejection(index, "invalid_occurred_at", "created_at is outside the UTC calendar")
        text = item.get("text", "")
        if not isinstance(text, str):
            return Rejection(index, "invalid_body", "text must be a string")
        try:
            digest = payload_hash(item)
        except RecursionError:
            return Rejection(index, "invalid_body", "the event is nested too deeply to hash")
        except ValueError:  # a non-finite number, or text that is not valid Unicode
            return Rejection(index, "invalid_body", "the event holds a value canonical JSON cannot carry")
        return Observation(
            index=index,
            source_system=self.source_system,
            source_account_ref=account,
            source_event_id=values["source_event_id"],
            event_type=values["event_type"],
            conversation_ref=values["conversation_ref"],
            message_ref=values["message_ref"],
            sender_ref=values["sender_ref"],
            occurred_at=occurred,
            occurred_at_original=values["occurred_at"][:64],
            payload_hash=digest,
            contract_version=config.contract_version,
            canary=config.canary,
            # PostgreSQL text cannot hold NUL; the hash above keeps the original.
            text=text.replace("\x00", "\ufffd"),
            handle=handle_of(item.get("from_handle")),
        )
