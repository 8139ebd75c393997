"""The WhatsApp Cloud API's state: phone numbers, approved templates, buyers' messages (and the
24-hour window each opens), the status plan, and the control API over them (`/_sim/whatsapp/`)."""

from __future__ import annotations

import json
import sqlite3
from typing import Callable
from urllib.parse import parse_qs

from simulators.meta.whatsapp_shapes import (
    INCOMING,
    WHATSAPP_OBJECT,
    change,
    display_number,
    inbound_message,
    wa_id_of,
    wamid,
)
from simulators.meta.whatsapp_statuses import DEFAULT_PLAN, plan_parse

SCHEMA = """
CREATE TABLE IF NOT EXISTS wa_numbers (id TEXT PRIMARY KEY, waba_id TEXT NOT NULL,
    display_phone_number TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS wa_templates (phone_number_id TEXT NOT NULL, name TEXT NOT NULL,
    language TEXT NOT NULL, category TEXT NOT NULL, PRIMARY KEY (phone_number_id, name, language));
CREATE TABLE IF NOT EXISTS wa_inbound (id TEXT PRIMARY KEY, phone_number_id TEXT NOT NULL,
    wa_id TEXT NOT NULL, type TEXT NOT NULL, message TEXT NOT NULL, timestamp INTEGER NOT NULL,
    seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS wa_sent (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
    phone_number_id TEXT NOT NULL, wa_id TEXT NOT NULL, recipient TEXT NOT NULL, type TEXT NOT NULL,
    content TEXT NOT NULL, context TEXT, callback_data TEXT, at REAL NOT NULL);
"""
INBOUND_TYPES = ("text", "interactive", "button", "image", "reaction")
TEMPLATE_CATEGORIES = ("utility", "marketing", "authentication")


class WhatsApp:
    """SimulatorState's WhatsApp numbers, templates, inbound messages, plan and sent log."""

    def _whatsapp_init(self) -> None:
        self.db.executescript(SCHEMA)

    def whatsapp_number(self, phone_number_id: str) -> sqlite3.Row | None:
        with self.lock:
            return self._one("SELECT * FROM wa_numbers WHERE id = ?", phone_number_id)

    def whatsapp_route(self, node: str, params: dict) -> bool:
        """Whether `POST /{node}/messages` is a Cloud API send (rather than Messenger's Send API)."""
        return params.get("messaging_product") == "whatsapp" or self.whatsapp_number(node) is not None

    def whatsapp_number_register(self, data: dict) -> dict:
        """A phone number of a WhatsApp Business Account (idempotent); on first registration the
        app (`app_id`, else the callback's) is subscribed to the account's `messages`."""
        number, waba = str(data["phone_number_id"]), str(data["waba_id"])
        if not (number.isdigit() and waba.isdigit()):
            raise ValueError("phone_number_id and waba_id are numeric ids")
        display = data.get("display_phone_number")
        with self._tx():
            row = self._one("SELECT * FROM wa_numbers WHERE id = ?", number)
            if row is None:
                self.db.execute(
                    "INSERT INTO wa_numbers (id, waba_id, display_phone_number) VALUES (?, ?, ?)",
                    (number, waba, str(display or display_number(number))),
                )
                app = str(data.get("app_id") or self.app_id or "")
                known = self._one("SELECT 1 FROM subscriptions WHERE account = ? AND app_id = ?", waba, app)
                if app and known is None:
                    self.subscription_set(account=waba, app_id=app, fields=["messages"])
            elif row["waba_id"] != waba:
                raise ValueError(f"phone number {number} belongs to WABA {row['waba_id']}")
            elif display:
                self.db.execute(
                    "UPDATE wa_numbers SET display_phone_number = ? WHERE id = ?", (str(display), number)
                )
            row = self._one("SELECT * FROM wa_numbers WHERE id = ?", number)
        return {
            "phone_number_id": row["id"],
            "waba_id": row["waba_id"],
            "display_phone_number": row["display_phone_number"],
        }

    def whatsapp_template_register(self, data: dict) -> dict:
        """An approved template of a number: `name`, `language` (en_US), `category` (utility)."""
        number, name = str(data["phone_number_id"]), str(data["name"])
        language = str(data.get("language") or "en_US")
        category = str(data.get("category") or "utility")
        if category not in TEMPLATE_CATEGORIES:
            raise ValueError(f"category is one of {TEMPLATE_CATEGORIES}")
        if self.whatsapp_number(number) is None:
            raise ValueError(f"register the number first: POST /_sim/whatsapp/numbers for {number}")
        with self._tx():
            self.db.execute(
                "INSERT INTO wa_templates (phone_number_id, name, language, category) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(phone_number_id, name, language) DO UPDATE SET category = excluded.category",
                (number, name, language, category),
            )
        return {"phone_number_id": number, "name": name, "language": language, "category": category}

    def whatsapp_inbound(self, data: dict) -> dict:
        """A buyer's message to a number: recorded (it opens or renews the 24-hour window for the
        buyer and that number) and, unless `notify` is false, notified in WhatsApp's shape."""
        number_id, sender = str(data["phone_number_id"]), wa_id_of(data["from"])
        if sender is None:
            raise ValueError("from is the buyer's number: digits, country code first")
        kind = str(data.get("type") or "text")
        if kind not in INBOUND_TYPES:
            raise ValueError(f"type is one of {INBOUND_TYPES}")
        text = str(data.get("text") or "")
        if kind in ("text", "interactive", "button") and not text:
            raise ValueError(f"a {kind} message needs its text")
        with self._tx():
            number = self._one("SELECT * FROM wa_numbers WHERE id = ?", number_id)
            if number is None:
                raise ValueError(f"register the number first: POST /_sim/whatsapp/numbers for {number_id}")
            name_key = f"wa_name:{number_id}:{sender}"
            name = str(data.get("name") or self._kv(name_key, f"Test Person {sender[-2:]}"))
            self._set_kv(name_key, name)
            timestamp = int(float(data["timestamp"])) if data.get("timestamp") else int(self.now())
            id = wamid(sender, INCOMING)
            context = data.get("context")
            last_sent = self._one(
                "SELECT id FROM wa_sent WHERE phone_number_id = ? AND wa_id = ? ORDER BY seq DESC LIMIT 1",
                number_id,
                sender,
            )
            message = inbound_message(
                kind=kind,
                sender=sender,
                id=id,
                timestamp=timestamp,
                text=text,
                payload=str(data.get("payload") or ""),
                context={"from": number["display_phone_number"], "id": str(context)} if context else None,
                reacted_to=str(data.get("message_id") or context or (last_sent["id"] if last_sent else "")),
            )
            self.db.execute(
                "INSERT INTO wa_inbound (id, phone_number_id, wa_id, type, message, timestamp, seq) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (id, number_id, sender, kind, json.dumps(message), timestamp, self._next("order")),
            )
        item = change(number, contacts=[{"profile": {"name": name}, "wa_id": sender}], messages=[message])
        delivery = None
        if data.get("notify", True) and self.subscribed(number["waba_id"], "messages"):
            delivery = self._emit(WHATSAPP_OBJECT, number["waba_id"], "changes", item)
        return {"id": id, **({"delivery": delivery} if delivery else {})}

    def whatsapp_window_opened(self, number_id: str, wa_id: str) -> int | None:
        """When the buyer last wrote to the number (unix seconds), None if never."""
        with self.lock:
            row = self._one(
                "SELECT MAX(timestamp) AS at FROM wa_inbound WHERE phone_number_id = ? AND wa_id = ?",
                number_id,
                wa_id,
            )
        return None if row is None or row["at"] is None else int(row["at"])

    def whatsapp_plan(self) -> dict:
        with self.lock:
            return json.loads(self._kv("wa_status_plan", json.dumps(DEFAULT_PLAN)))

    def whatsapp_plan_set(self, data: dict | None) -> dict:
        """How later sends' statuses come; None restores the default (sent, delivered, read)."""
        plan = DEFAULT_PLAN if data is None else plan_parse(data)
        with self._tx():
            self._set_kv("wa_status_plan", json.dumps(plan))
            self._set_kv("wa_status_plan_sends", "0")
        return dict(plan)

    def whatsapp_sent(self) -> dict:
        """Every applied send, oldest first, and how many carried each `biz_opaque_callback_data`."""
        with self.lock:
            rows = self._all("SELECT * FROM wa_sent ORDER BY seq")
        sent, counts = [], {}
        for row in rows:
            item = {
                "id": row["id"],
                "phone_number_id": row["phone_number_id"],
                "to": row["recipient"],
                "type": row["type"],
                row["type"]: json.loads(row["content"]),
                **({"context": json.loads(row["context"])} if row["context"] else {}),
                "biz_opaque_callback_data": row["callback_data"],
                "at": row["at"],
            }
            sent.append(item)
            if row["callback_data"] is not None:
                counts[row["callback_data"]] = counts.get(row["callback_data"], 0) + 1
        return {"sent": sent, "by_callback_data": counts}


def whatsapp_control(state, method: str, name: str, data: dict) -> tuple[int, dict]:
    """`/_sim/whatsapp/<name>`: (HTTP status, answer)."""
    routes: dict[tuple[str, str], Callable[[dict], dict]] = {
        ("POST", "numbers"): state.whatsapp_number_register,
        ("POST", "templates"): state.whatsapp_template_register,
        ("POST", "messages"): state.whatsapp_inbound,
        ("POST", "status_plan"): state.whatsapp_plan_set,
        ("DELETE", "status_plan"): lambda _: state.whatsapp_plan_set(None),
        ("GET", "status_plan"): lambda _: state.whatsapp_plan(),
        ("GET", "sent"): lambda _: state.whatsapp_sent(),
    }
    handler = routes.get((method, name))
    if handler is None:
        return 404, {"error": f"no control route {method} /_sim/whatsapp/{name}"}
    return 200, handler(data)


def whatsapp_send_body(state, parsed: tuple[str, list[str]] | None, raw: bytes) -> dict | None:
    """The body of a Cloud API send (`POST /{phone-number-id}/messages` on the Facebook host, with
    `messaging_product: whatsapp` or to a registered number), else None."""
    if parsed is None or parsed[0] != "facebook" or len(parsed[1]) != 2 or parsed[1][1] != "messages":
        return None
    try:
        text = raw.decode()
        body = (
            json.loads(text)
            if text.lstrip().startswith("{")
            else {k: v[0] for k, v in parse_qs(text).items()}
        )
    except (ValueError, UnicodeDecodeError):
        body = {}
    body = body if isinstance(body, dict) else {}
    if body.get("messaging_product") == "whatsapp" or state.whatsapp_number(parsed[1][0]) is not None:
        return body
    return None


def whatsapp_target(body: dict) -> str:
    """What a send concerns, for the fault log: its reply key, else its recipient."""
    return str(body.get("biz_opaque_callback_data") or body.get("to") or "")
