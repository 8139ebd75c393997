"""The simulator's store: one SQLite database behind one lock; accounts, subscriptions, cursors."""

from __future__ import annotations

import base64
import ipaddress
import json
import secrets
import sqlite3
import threading
from collections import Counter
from urllib.parse import urlsplit

from simulators.meta.errors import GraphError
from simulators.meta.faults import Fault

# What an account is subscribed to when nobody says otherwise (Meta's per-asset subscription).
DEFAULT_FIELDS = {
    "instagram": ["comments", "live_comments", "messages"],
    "page": ["feed", "messages", "message_echoes"],
}
FEED_PAGING = ("time", "cursor")

SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS accounts (id TEXT PRIMARY KEY, object TEXT NOT NULL, name TEXT NOT NULL,
    page_id TEXT);
CREATE TABLE IF NOT EXISTS subscriptions (account TEXT NOT NULL, app_id TEXT NOT NULL,
    fields TEXT NOT NULL, PRIMARY KEY (account, app_id));
CREATE TABLE IF NOT EXISTS media (id TEXT PRIMARY KEY, account TEXT NOT NULL, object TEXT NOT NULL,
    product_type TEXT NOT NULL, created REAL NOT NULL, ad_id TEXT, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS comments (id TEXT PRIMARY KEY, account TEXT NOT NULL, object TEXT NOT NULL,
    media_id TEXT NOT NULL, parent_id TEXT, text TEXT NOT NULL, from_id TEXT NOT NULL,
    from_name TEXT NOT NULL, created REAL NOT NULL, hidden INTEGER NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS messages (mid TEXT PRIMARY KEY, account TEXT NOT NULL,
    sender TEXT NOT NULL, recipient TEXT NOT NULL, text TEXT NOT NULL, metadata TEXT,
    comment_id TEXT, created_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS applied (kind TEXT NOT NULL, comment_id TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (kind, comment_id));
CREATE TABLE IF NOT EXISTS pending (seq INTEGER PRIMARY KEY AUTOINCREMENT, object TEXT NOT NULL,
    account TEXT NOT NULL, kind TEXT NOT NULL, item TEXT NOT NULL, at REAL NOT NULL);
"""
# Added after the first release: a state file written before them gains them on open.
MESSAGE_COLUMNS = {"conversation": "TEXT", "person": "TEXT", "seq": "INTEGER"}


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Store:
    """The state's storage: the database, its helpers, accounts and subscriptions, and cursors."""

    def __init__(
        self,
        *,
        state_path: str | None = None,
        callback: str | None = None,
        app_id: str | None = None,
        app_secret: str | None = None,
        batch: bool = False,
        hang_seconds: float = 15.0,
    ) -> None:
        if callback:
            host = urlsplit(callback).hostname or ""
            if not is_loopback_host(host):
                raise ValueError(f"callback {callback!r} is not a loopback URL")
            if not (app_id and app_secret):
                raise ValueError("a callback needs an app id and an app secret")
        self.callback, self.app_id, self.app_secret = callback, app_id, app_secret
        self.batch, self.hang_seconds = batch, hang_seconds
        self.lock = threading.RLock()
        self.stopping = threading.Event()
        # What GET /debug_token reports for every token: unix expiry (0: never, as a Page token) and
        # validity. In memory only: tests set it per run through POST /_sim/token.
        self.token_expires_at, self.token_valid = 0, True
        self._tokens_init()  # per-token checking, off until a test registers one (tokens.py)
        self._logins_init()  # login flows' codes and the account each grants (login.py)
        self.db = sqlite3.connect(state_path or ":memory:", check_same_thread=False, isolation_level=None)
        if state_path:
            self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)
        self._whatsapp_init()  # the Cloud API's numbers, templates, messages and sends (whatsapp.py)
        present = {row[1] for row in self.db.execute("PRAGMA table_info(messages)")}
        for column, kind in MESSAGE_COLUMNS.items():
            if column not in present:
                self.db.execute(f"ALTER TABLE messages ADD COLUMN {column} {kind}")
        if "caption" not in {row[1] for row in self.db.execute("PRAGMA table_info(media)")}:
            self.db.execute("ALTER TABLE media ADD COLUMN caption TEXT NOT NULL DEFAULT ''")
        self.faults: list[Fault] = []
        self.calls: Counter[str] = Counter()
        self.call_log: list[dict] = []
        # Every fault that fired: {"at", "mode", "code", "subcode", "status", "method", "path", "target"}
        # (target: the comment a write concerned), so a test can tell which send met which fault.
        self.fault_log: list[dict] = []
        self.deliveries: list[dict] = []

    # -- storage helpers -------------------------------------------------------------------
    def _tx(self):
        return _Transaction(self)

    def _one(self, sql: str, *args) -> sqlite3.Row | None:
        cur = self.db.execute(sql, args)
        cur.row_factory = sqlite3.Row
        return cur.fetchone()

    def _all(self, sql: str, *args) -> list[sqlite3.Row]:
        cur = self.db.execute(sql, args)
        cur.row_factory = sqlite3.Row
        return cur.fetchall()

    def _kv(self, key: str, default: str) -> str:
        row = self._one("SELECT value FROM kv WHERE key = ?", key)
        return row["value"] if row else default

    def _set_kv(self, key: str, value: str) -> None:
        self.db.execute(
            "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def _next(self, name: str) -> int:
        value = int(self._kv(f"seq:{name}", "0")) + 1
        self._set_kv(f"seq:{name}", str(value))
        return value

    def close(self) -> None:
        self.stopping.set()
        with self.lock:
            self.db.close()

    # -- accounts and subscriptions --------------------------------------------------------
    def account_upsert(
        self,
        *,
        id: str,
        object: str,
        app_id: str | None = None,
        subscribed_fields: list[str] | None = None,
        name: str | None = None,
        page_id: str | None = None,
        feed_paging: str | None = None,
    ) -> dict:
        if object not in DEFAULT_FIELDS:
            raise ValueError("object is instagram or page")
        if feed_paging is not None and feed_paging not in FEED_PAGING:
            raise ValueError(f"feed_paging is one of {FEED_PAGING}")
        with self._tx():
            if feed_paging is not None:
                self._set_kv(f"feed_paging:{id}", feed_paging)
            row = self._one("SELECT * FROM accounts WHERE id = ?", id)
            if row is None:
                self.db.execute(
                    "INSERT INTO accounts (id, object, name, page_id) VALUES (?, ?, ?, ?)",
                    (id, object, name or f"acct_test_{id}", page_id),
                )
                app = app_id or self.app_id
                if app:
                    fields = DEFAULT_FIELDS[object] if subscribed_fields is None else subscribed_fields
                    self.subscription_set(account=id, app_id=app, fields=fields)
            else:
                if row["object"] != object:
                    raise ValueError(f"account {id} is already a {row['object']} account")
                if name or page_id:
                    self.db.execute(
                        "UPDATE accounts SET name = COALESCE(?, name), "
                        "page_id = COALESCE(?, page_id) WHERE id = ?",
                        (name, page_id, id),
                    )
                if app_id and subscribed_fields is not None:
                    self.subscription_set(account=id, app_id=app_id, fields=subscribed_fields)
            return dict(self._one("SELECT * FROM accounts WHERE id = ?", id))

    def account(self, account_id: str) -> sqlite3.Row | None:
        with self.lock:
            return self._one("SELECT * FROM accounts WHERE id = ?", account_id)

    def feed_paging(self, account_id: str) -> str:
        with self.lock:
            return self._kv(f"feed_paging:{account_id}", "time")

    def subscription_set(self, *, account: str, app_id: str, fields: list[str]) -> None:
        with self._tx():
            self.db.execute(
                "INSERT INTO subscriptions (account, app_id, fields) VALUES (?, ?, ?) "
                "ON CONFLICT(account, app_id) DO UPDATE SET fields = excluded.fields",
                (account, app_id, json.dumps(list(fields))),
            )

    def subscribed_apps(self, account: str) -> list[dict]:
        with self.lock:
            rows = self._all("SELECT * FROM subscriptions WHERE account = ? ORDER BY app_id", account)
        return [
            {
                "id": r["app_id"],
                "name": f"Conduit simulator app {r['app_id']}",
                "subscribed_fields": json.loads(r["fields"]),
            }
            for r in rows
            if json.loads(r["fields"])
        ]

    def subscribed(self, account: str, field: str) -> bool:
        """Whether the callback's app gets `field` for this account (Meta notifies nothing else)."""
        with self.lock:
            row = self._one(
                "SELECT fields FROM subscriptions WHERE account = ? AND app_id = ?",
                account,
                self.app_id or "",
            )
        return bool(row) and field in json.loads(row["fields"])

    # -- cursors ---------------------------------------------------------------------------
    def cursor_encode(self, position: tuple[float, int]) -> str:
        with self.lock:
            epoch = self._kv("cursor_epoch", "0")
        raw = json.dumps([epoch, position[0], position[1], secrets.token_hex(4)]).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def cursor_decode(self, cursor: str) -> tuple[float, int]:
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            epoch, created, seq, _ = json.loads(raw)
        except (ValueError, TypeError):
            raise GraphError(100, type_="GraphMethodException", message="Invalid cursor") from None
        with self.lock:
            current = self._kv("cursor_epoch", "0")
        if epoch != current:
            raise GraphError(100, type_="GraphMethodException", message="Invalid cursor")
        return float(created), int(seq)

    def paging_token_encode(self, position: tuple[float, int]) -> str:
        """`__paging_token` of a time-paged list: the page edge's (time, order), so that `until`
        (whole seconds) plus the token tell apart items of one second, as Meta's `enc_...` do."""
        return "enc_" + self.cursor_encode(position)

    def paging_token_decode(self, token: str) -> tuple[float, int]:
        return self.cursor_decode(token.removeprefix("enc_"))

    def expire_cursors(self) -> None:
        with self._tx():
            self._set_kv("cursor_epoch", str(int(self._kv("cursor_epoch", "0")) + 1))


class _Transaction:
    """BEGIN IMMEDIATE/COMMIT under the state lock; nested uses join the outer transaction."""

    def __init__(self, state: Store) -> None:
        self.state = state

    def __enter__(self) -> None:
        self.state.lock.acquire()
        self.outer = not self.state.db.in_transaction
        if self.outer:
            self.state.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if self.outer:
                self.state.db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            self.state.lock.release()
