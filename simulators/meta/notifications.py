"""Webhook notifications: signed as Meta signs them, posted to the callback, queued or batched."""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
import threading
import time
import urllib.error
import urllib.request

from simulators.meta.shapes import _hash_digits
from simulators.meta.whatsapp_shapes import WHATSAPP_OBJECT


def encode_body(payload: dict) -> bytes:
    """Meta's notification bytes: compact, non-ASCII and '/' escaped, as its PHP-style encoder does."""
    return json.dumps(payload, ensure_ascii=True, separators=(",", ":")).replace("/", "\\/").encode()


def sign_body(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Notifications:
    """SimulatorState's notifications: what a change notifies, and the pending queue's delivery."""

    def _notify_comment(self, row: sqlite3.Row, verb: str, *, background: bool = False) -> dict | None:
        if row["object"] == "instagram":
            media = self.media_row(row["media_id"])
            field = "live_comments" if media["product_type"] == "LIVE" else "comments"
            value = {
                "id": row["id"],
                "text": row["text"],
                "from": {"id": row["from_id"], "username": row["from_name"]},
                "media": {"id": media["id"], "media_product_type": media["product_type"]},
            }
            if row["from_id"] == row["account"]:
                # The account's own comment carries its Instagram-scoped id too (Meta's "self
                # comment webhook"; recorded in a vendor's sample of a received notification).
                value["from"]["self_ig_scoped_id"] = "2" + _hash_digits(f"igsid:{row['account']}", 15)
            if media["ad_id"]:
                value["media"]["ad_id"] = media["ad_id"]
            if row["parent_id"]:
                value["parent_id"] = row["parent_id"]
        else:
            field = "feed"
            value = {
                "from": {"id": row["from_id"], "name": row["from_name"]},
                "post_id": row["media_id"],
                "comment_id": row["id"],
                "created_time": int(row["created"]),
                "item": "comment",
                "parent_id": row["parent_id"] or row["media_id"],
                "verb": verb,
                "message": row["text"],
            }
            if verb == "remove":
                value.pop("message")
        if not self.subscribed(row["account"], field):
            return None
        return self._emit(
            row["object"], row["account"], "changes", {"field": field, "value": value}, background=background
        )

    def _emit(
        self, object: str, account: str, kind: str, item: dict, *, background: bool = False
    ) -> dict | None:
        """Post one notification now, or queue it for /_sim/notify when batching.

        A Graph write's notifications (echoes, the account's own comments) go from a background
        thread: the sender's answer must not wait on the receiver, which may be waiting on the sender.
        """
        if not self.callback:
            return None
        with self._tx():
            self.db.execute(
                "INSERT INTO pending (object, account, kind, item, at) VALUES (?, ?, ?, ?, ?)",
                (object, account, kind, json.dumps(item), time.time()),
            )
        if self.batch:
            return {"queued": True}
        if background:
            threading.Thread(target=self._flush_quietly, daemon=True).start()
            return {"queued": True}
        sent = self.flush()
        return sent[-1] if sent else None

    def _emit_series(self, object: str, account: str, kind: str, items: list[dict]) -> None:
        """Several notifications of one write (a WhatsApp send's statuses), each its own body,
        posted in order from one background thread; queued together when batching."""
        if not self.callback or not items:
            return
        if self.batch:
            for item in items:
                self._emit(object, account, kind, item)
            return

        def post_in_order() -> None:
            try:
                for item in items:
                    self._emit(object, account, kind, item)
            except sqlite3.ProgrammingError:  # closed meanwhile: nothing to send to
                pass

        threading.Thread(target=post_in_order, daemon=True).start()

    def _flush_quietly(self) -> None:
        try:
            self.flush()
        except sqlite3.ProgrammingError:  # closed while the thread started: nothing to send to
            pass

    def flush(self) -> list[dict]:
        """Send everything pending: one body per object, one entry per account and kind."""
        with self._tx():
            rows = self._all("SELECT * FROM pending ORDER BY seq")
            self.db.execute("DELETE FROM pending")
        bodies: dict[str, dict[tuple[str, str], list]] = {}
        for row in rows:
            bodies.setdefault(row["object"], {}).setdefault((row["account"], row["kind"]), []).append(
                (row["at"], json.loads(row["item"]))
            )
        results = []
        for object, entries in bodies.items():
            payload = {"object": object, "entry": []}
            for (account, kind), items in entries.items():
                latest = max(at for at, _ in items)
                entry_time = int(latest * 1000) if kind == "messaging" else int(latest)
                timed = {} if object == WHATSAPP_OBJECT else {"time": entry_time}  # recorded: id, changes
                payload["entry"].append({"id": account, **timed, kind: [i for _, i in items]})
            results.append(self._post(payload, rows=[r for r in rows if r["object"] == object]))
        return results

    def _post(self, payload: dict, *, rows: list) -> dict:
        body = encode_body(payload)
        request = urllib.request.Request(
            self.callback,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "X-Hub-Signature-256": sign_body(body, self.app_secret),
                "X-Hub-Signature": "sha1="
                + hmac.new(self.app_secret.encode(), body, hashlib.sha1).hexdigest(),
                "User-Agent": "facebookexternalua",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                status, answer = response.status, response.read(2000)
        except urllib.error.HTTPError as exc:
            status, answer = exc.code, exc.read(2000)
        except OSError as exc:
            status, answer = 0, str(exc).encode()
        if status != 200:
            # Meta retries what was not answered 200; re-queue so /_sim/notify re-sends it
            # (re-batched, as Meta may do).
            with self._tx():
                for row in rows:
                    self.db.execute(
                        "INSERT INTO pending (object, account, kind, item, at) VALUES (?, ?, ?, ?, ?)",
                        (row["object"], row["account"], row["kind"], row["item"], row["at"]),
                    )
        result = {
            "status": status,
            "entries": len(payload["entry"]),
            "body_sha256": hashlib.sha256(body).hexdigest(),
            "answer": answer.decode("utf-8", "replace"),
        }
        with self.lock:
            self.deliveries.append(result)
        return result
