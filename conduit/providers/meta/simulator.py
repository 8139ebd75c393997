"""The Graph API simulator: a loopback stand-in for Meta's Graph API, its webhooks and its failures.

It serves the Graph routes Conduit reads and writes with the shapes recorded from Meta
(fixtures/meta_*/recorded/, described in fixtures/meta_recorded_PROVENANCE.md), under both hosts'
route sets on one port, and keeps its state in SQLite so a restart loses nothing:

    Facebook host:  http://127.0.0.1:PORT/vNN.N/...
    Instagram host: http://127.0.0.1:PORT/instagram/vNN.N/...   (Instagram routes only)

    GET  /{ig-user-id}/media?since=&until=            media, newest first, cursor-paged (both hosts)
    GET  /{ig-media-id}/comments?fields=...replies{..} top-level comments, newest first (both)
    GET  /{ig-comment-id}/replies                     replies, newest first      (both hosts)
    GET  /{page-id}/feed|posts?since=&until=          posts, newest first, TIME-paged (Facebook)
    GET  /{post-id}/comments?filter=stream&summary=   every comment, chronological (Facebook)
    GET  /{comment-id}/comments                       replies to a comment, chronological (Facebook)
    GET  /{id}                                        one comment, media, post, conversation or
                                                      message (Instagram objects on both hosts,
                                                      Page and Messenger objects Facebook only)
    GET  /{ig-id}/conversations[?user_id=]            Instagram conversations   (Instagram host)
    GET  /{page-id}/conversations?platform=instagram|messenger[&user_id=]   (Facebook host; instagram:
                                                      the Instagram account linked to the Page)
         -> {"data": [{"id", "updated_time"}], "paging": {"cursors": {"after"}, "next"}}, newest first
    GET  /{conversation-id}?fields=messages[{id,created_time,from,to,message}]
         -> {"messages": {"data": [...], "paging"?}, "id"}, newest first; details only for the 20 newest
    GET  /{message-id}?fields=id,created_time,from,to,message   (an error past the 20 newest)
    GET  /{page-id|ig-id}/subscribed_apps             {"data": [{"id", "name", "subscribed_fields"}]}
    POST /{ig-comment-id}/replies  message=           public reply -> {"id"}     (both hosts)
    POST /{comment-id}/comments    message=           public reply -> {"id"}     (Facebook)
    POST /{page-id}/messages  {"recipient": {"comment_id"}, "message": {"text", "metadata"?}}
    POST /{ig-id}/messages    (same body)             private reply -> {"recipient_id", "message_id"}
                                                      (Instagram host; on the Facebook host the Page
                                                      node sends and /{ig-id}/messages answers (#3))

Ids have Meta's shapes: Instagram media and comments 17 digits; Instagram message ids (`mid`, the
private reply's `message_id`) are Meta's Z-escaped base64 of `ig_dm_item:1:IGMessageID:<ig-id>:
<thread>:<number>` (about 164 characters, `aWdf...`) and conversation ids of `ig_dm:1:IGMessageThread:
<ig-id>:<thread>` (about 110); Page posts `<page-id>_<digits>`, Page comments `<post-digits>_<digits>`,
Messenger mids `m_` + 86 base64url characters, Messenger conversations `t_<digits>`.

Paging, as recorded: media and comment edges by cursor (`paging.cursors.{before,after}`, `next`
absent on the last page); `/feed` and `/posts` by time (`paging.previous` carries `since=<newest>`,
`__paging_token` and `__previous=1`, `paging.next` carries `until=<oldest>` and `__paging_token`,
no `cursors`; the token tells apart posts of one second). An account registered with
`"feed_paging": "cursor"` pages its feed by cursor instead (also recorded, Graph v5.0-v10.0).
The conversation endpoints page by `cursors.after` + `next` and leave `paging` out when one page
holds everything. `limit` defaults to 25 (at most 50 on comment edges, 100 on media/feed). Every
error uses Meta's envelope; its keys follow the recordings per code (`is_transient` and
`error_user_*` only where Meta sends them), and on the Instagram host its type is IGApiException.

The control API (never counted as Graph calls):

    POST /_sim/accounts       {"id", "object": "instagram"|"page", "app_id"?, "subscribed_fields"?,
                               "username"?, "name"?, "page_id"?, "feed_paging"?}   register (idempotent)
    POST /_sim/media          {"account", "id"?, "object"?, "media_product_type"?, "created_time"?,
                               "ad_id"?, "message"?} -> {"id"} (minted in Meta's shape without "id")
    POST /_sim/comments       {"account", "media_id"|"post_id", "text", "from_id", ...} -> {"id"}
    POST /_sim/messages       {"account", "from_id", "to_id"?, "text", "from_name"?, "created_time"?,
                               "notify"} -> {"mid", "conversation_id"}
    POST /_sim/subscriptions  {"account", "app_id", "fields": [...]}   ([] = unsubscribed)
    POST /_sim/faults         {"mode", "count", "code", "subcode", "status", "message", "user_title",
                               "user_msg", "latency_ms", "retry_minutes", "hang_seconds",
                               "path_contains", "method", "call_count"}
                              ("usage": answer normally with X-Business-Use-Case-Usage at call_count %;
                               code 3 and 200-299 answer Meta's recorded wording unless "message" says)
    DELETE /_sim/faults       clear every pending fault
    GET  /_sim/faults         {"pending": N, "fired": [{"at", "mode", "code", "subcode", "status",
                               "method", "path", "target"}]}  (target: the comment a write concerned)
    GET  /_sim/calls          {"calls": N, "by_path": {...}, "log": [...]};  DELETE resets
    POST /_sim/notify         send every queued notification (batched bodies)
    GET  /_sim/notifications  what was posted to the callback, with the answers
    GET  /_sim/applied        {"public": {comment_id: n}, "private": {comment_id: n}}
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import json
import re
import secrets
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

READ_MODES = ("error", "timeout", "drop", "latency", "usage")
WRITE_MODES = ("apply_then_error", "apply_then_timeout", "apply_then_drop")
FAULT_MODES = READ_MODES + WRITE_MODES + ("expire_cursors", "clear")
DEFAULT_LIMIT = 25
MAX_COMMENTS_PAGE = 50
MAX_MEDIA_PAGE = 100
PRIVATE_REPLY_WINDOW = 7 * 24 * 3600
# Meta: "You can only get details about the 20 most recent messages" of a conversation.
MESSAGE_DETAILS_WINDOW = 20
VERSION = re.compile(r"^v\d+\.\d+$")
# What an account is subscribed to when nobody says otherwise (Meta's per-asset subscription).
DEFAULT_FIELDS = {"instagram": ["comments", "live_comments", "messages"],
                  "page": ["feed", "messages", "message_echoes"]}
FEED_PAGING = ("time", "cursor")
# Meta's wording per code, "(#code) ..." as Graph phrases most of them; a fault may override it.
MESSAGES = {
    1: "An unknown error occurred",
    2: "An unexpected error has occurred. Please retry your request later.",
    3: "(#3) Application does not have the capability to make this API call.",
    4: "(#4) Application request limit reached",
    10: "(#10) This message is sent outside of allowed window.",
    17: "(#17) User request limit reached",
    32: "(#32) Page request limit reached",
    100: "(#100) Invalid parameter",
    190: "Error validating access token: Session has expired.",
    200: "(#200) Requires pages_messaging permission to manage the object",
    230: "(#230) Requires pages_messaging_subscriptions permission to manage the object",
    551: "(#551) This person isn't available right now.",
    613: "(#613) Calls to this api have exceeded the rate limit.",
    10900: "(#10900) Activity already replied to",
    80001: "(#80001) There have been too many calls to this Page account. Wait a bit and try again.",
    80002: "(#80002) There have been too many calls to this Instagram account. Wait a bit and try again.",
    80006: "(#80006) There have been too many messenger api calls to this Page account. "
           "Wait a bit and try again.",
}
TRANSIENT = {1, 2, 4, 17, 32, 613, 80001, 80002, 80006}
OAUTH = {3, 4, 10, 17, 32, 102, 104, 190, 613, 10900, 80001, 80002, 80006} | set(range(200, 300))
# Error envelopes as recorded: throttles and server errors carry `is_transient` and the user
# title/message; the refusals recorded (3, 10, 100, 190, 200-299...) carry only message, type,
# code, error_subcode (when there is one) and fbtrace_id. GraphError(full=True) forces the former.
FULL_ENVELOPE = TRANSIENT
# On graph.instagram.com Meta types its errors IGApiException (restfb's ig_login_exception.json,
# a code 10/2534022 answer quoted by an open-source client); the token and throttle codes keep theirs.
IG_HOST_KEEPS_TYPE = {102, 104, 190} | TRANSIENT

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


class GraphError(Exception):
    """A Graph answer in Meta's error envelope."""

    def __init__(self, code: int, *, subcode: int | None = None, status: int | None = None,
                 message: str | None = None, type_: str | None = None, full: bool | None = None,
                 user_title: str | None = None, user_msg: str | None = None) -> None:
        super().__init__(message or MESSAGES.get(code, f"(#{code}) Error"))
        self.code, self.subcode = code, subcode
        self.status = status or (500 if code in (1, 2) else 403 if 200 <= code < 300 else 400)
        self.message = message or MESSAGES.get(code, f"(#{code}) Permissions error" if 200 <= code < 300
                                               else f"(#{code}) Error")
        self.type = type_ or ("OAuthException" if code in OAUTH else
                              "FacebookApiException" if code in (1, 2) else "GraphMethodException")
        self.full = code in FULL_ENVELOPE if full is None else full
        self.user_title, self.user_msg = user_title, user_msg

    def envelope(self, host: str = "facebook") -> dict:
        error: dict = {"message": self.message, "type": self.type, "code": self.code}
        if host == "instagram" and self.code not in IG_HOST_KEEPS_TYPE:
            error["type"] = "IGApiException"
        if self.subcode is not None:
            error["error_subcode"] = self.subcode
        if self.full:
            error["is_transient"] = self.code in TRANSIENT
        if self.full or self.user_title is not None or self.user_msg is not None:
            error["error_user_title"] = self.user_title or ""
            error["error_user_msg"] = self.user_msg or ""
        error["fbtrace_id"] = "A" + secrets.token_urlsafe(15)
        return {"error": error}


def _whole_seconds() -> float:
    """Now, as Meta keeps an object's time: whole seconds."""
    return float(int(time.time()))

def not_found(node: str) -> GraphError:
    return GraphError(100, subcode=33, message=(
        f"Unsupported get request. Object with ID '{node}' does not exist, cannot be loaded due "
        "to missing permissions, or does not support this operation."))


def _hash_digits(seed: str, count: int) -> str:
    """`count` decimal digits drawn from a hash of `seed` (stable: the same seed, the same digits)."""
    value = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")
    return str(value % 10 ** count).rjust(count, "0")


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
        number = str(3 * 10 ** 34 + created_ms * 10 ** 9 + seq % 10 ** 9)
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
            part, sub = part[:part.index("{")], part[part.index("{") + 1:-1]
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


def encode_body(payload: dict) -> bytes:
    """Meta's notification bytes: compact, non-ASCII and '/' escaped, as its PHP-style encoder does."""
    return json.dumps(payload, ensure_ascii=True, separators=(",", ":")).replace("/", "\\/").encode()


def sign_body(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Fault:
    def __init__(self, data: dict, default_hang: float) -> None:
        self.mode = str(data.get("mode", "error"))
        if self.mode not in FAULT_MODES:
            raise ValueError(f"mode is one of {FAULT_MODES}")
        self.count = int(data.get("count", 1))
        self.code = int(data.get("code", 2))
        self.subcode = int(data["subcode"]) if data.get("subcode") is not None else None
        self.status = int(data["status"]) if data.get("status") is not None else None
        self.message = data.get("message")
        self.user_title, self.user_msg = data.get("user_title"), data.get("user_msg")
        self.latency = float(data.get("latency_ms", 0)) / 1000
        self.retry_minutes = data.get("retry_minutes")
        # mode "usage": answer normally, with X-Business-Use-Case-Usage at this call_count (percent).
        self.call_count = int(data.get("call_count", 95))
        self.hang = float(data.get("hang_seconds", default_hang))
        self.path_contains = str(data.get("path_contains") or "")
        self.method = str(data.get("method") or "").upper()

    def matches(self, method: str, path: str) -> bool:
        if self.method and self.method != method:
            return False
        # apply_then_* only make sense where something is applied: writes.
        if self.mode in WRITE_MODES and method != "POST":
            return False
        return self.path_contains in path

    def error(self) -> GraphError:
        return GraphError(self.code, subcode=self.subcode, status=self.status, message=self.message,
                          user_title=self.user_title, user_msg=self.user_msg)


class SimulatorState:
    """Everything the simulator knows, in one SQLite database behind one lock."""

    def __init__(self, *, state_path: str | None = None, callback: str | None = None,
                 app_id: str | None = None, app_secret: str | None = None, batch: bool = False,
                 hang_seconds: float = 15.0) -> None:
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
        self.db = sqlite3.connect(state_path or ":memory:", check_same_thread=False, isolation_level=None)
        if state_path:
            self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(SCHEMA)
        present = {row[1] for row in self.db.execute("PRAGMA table_info(messages)")}
        for column, kind in MESSAGE_COLUMNS.items():
            if column not in present:
                self.db.execute(f"ALTER TABLE messages ADD COLUMN {column} {kind}")
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
        self.db.execute("INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE "
                        "SET value = excluded.value", (key, value))

    def _next(self, name: str) -> int:
        value = int(self._kv(f"seq:{name}", "0")) + 1
        self._set_kv(f"seq:{name}", str(value))
        return value

    def close(self) -> None:
        self.stopping.set()
        with self.lock:
            self.db.close()

    # -- accounts and subscriptions --------------------------------------------------------
    def account_upsert(self, *, id: str, object: str, app_id: str | None = None,
                       subscribed_fields: list[str] | None = None, name: str | None = None,
                       page_id: str | None = None, feed_paging: str | None = None) -> dict:
        if object not in DEFAULT_FIELDS:
            raise ValueError("object is instagram or page")
        if feed_paging is not None and feed_paging not in FEED_PAGING:
            raise ValueError(f"feed_paging is one of {FEED_PAGING}")
        with self._tx():
            if feed_paging is not None:
                self._set_kv(f"feed_paging:{id}", feed_paging)
            row = self._one("SELECT * FROM accounts WHERE id = ?", id)
            if row is None:
                self.db.execute("INSERT INTO accounts (id, object, name, page_id) VALUES (?, ?, ?, ?)",
                                (id, object, name or f"acct_test_{id}", page_id))
                app = app_id or self.app_id
                if app:
                    fields = DEFAULT_FIELDS[object] if subscribed_fields is None else subscribed_fields
                    self.subscription_set(account=id, app_id=app, fields=fields)
            else:
                if row["object"] != object:
                    raise ValueError(f"account {id} is already a {row['object']} account")
                if name or page_id:
                    self.db.execute("UPDATE accounts SET name = COALESCE(?, name), "
                                    "page_id = COALESCE(?, page_id) WHERE id = ?", (name, page_id, id))
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
            self.db.execute("INSERT INTO subscriptions (account, app_id, fields) VALUES (?, ?, ?) "
                            "ON CONFLICT(account, app_id) DO UPDATE SET fields = excluded.fields",
                            (account, app_id, json.dumps(list(fields))))

    def subscribed_apps(self, account: str) -> list[dict]:
        with self.lock:
            rows = self._all("SELECT * FROM subscriptions WHERE account = ? ORDER BY app_id", account)
        return [{"id": r["app_id"], "name": f"Conduit simulator app {r['app_id']}",
                 "subscribed_fields": json.loads(r["fields"])}
                for r in rows if json.loads(r["fields"])]

    def subscribed(self, account: str, field: str) -> bool:
        """Whether the callback's app gets `field` for this account (Meta notifies nothing else)."""
        with self.lock:
            row = self._one("SELECT fields FROM subscriptions WHERE account = ? AND app_id = ?",
                            account, self.app_id or "")
        return bool(row) and field in json.loads(row["fields"])

    # -- content ---------------------------------------------------------------------------
    def media_upsert(self, *, account: str, id: str | None, object: str, product_type: str | None = None,
                     created: float | None = None, ad_id: str | None = None) -> sqlite3.Row:
        with self._tx():
            if not id:
                id = self._new_id(object, account, post=True)
            row = self._one("SELECT * FROM media WHERE id = ?", id)
            if row is None:
                self.db.execute(
                    "INSERT INTO media (id, account, object, product_type, created, ad_id, seq) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (id, account, object, product_type or ("FEED" if object == "instagram" else "POST"),
                     _whole_seconds() if created is None else created, ad_id, self._next("order")))
                row = self._one("SELECT * FROM media WHERE id = ?", id)
            elif row["account"] != account:
                raise ValueError(f"{id} belongs to account {row['account']}")
            return row

    def comment_create(self, data: dict) -> dict:
        """Add a comment (and its media/post on first use); notify it when asked to."""
        account = str(data["account"])
        media_id = data.get("media_id") or data.get("post_id")
        if not media_id or not data.get("from_id"):
            raise ValueError("account, media_id or post_id, and from_id are required")
        object = "instagram" if data.get("media_id") else "page"
        verb = str(data.get("verb") or "add")
        with self._tx():
            self.account_upsert(id=account, object=object)
            created = float(data["created_time"]) if data.get("created_time") is not None else _whole_seconds()
            if verb != "add":
                return self._comment_change(data, account, verb)
            product = data.get("media_product_type")
            media = self.media_upsert(account=account, id=str(media_id), object=object,
                                      product_type=product, ad_id=data.get("ad_id"),
                                      created=(float(data["media_created_time"])
                                               if data.get("media_created_time") is not None else created))
            parent_id = data.get("parent_id")
            if parent_id:
                parent = self._one("SELECT * FROM comments WHERE id = ?", str(parent_id))
                if parent is None or parent["media_id"] != media["id"]:
                    raise ValueError(f"parent {parent_id} is not a comment on {media_id}")
                if object == "instagram" and parent["parent_id"]:
                    parent_id = parent["parent_id"]  # Instagram threads are one level deep
            comment_id = str(data.get("id") or self._new_id(object, str(media_id)))
            name = data.get("from_name") or (self._one("SELECT name FROM accounts WHERE id = ?", account)["name"]
                                             if str(data["from_id"]) == account
                                             else f"user_test_{data['from_id']}")
            self.db.execute(
                "INSERT INTO comments (id, account, object, media_id, parent_id, text, from_id, from_name,"
                " created, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (comment_id, account, object, str(media_id), parent_id, str(data.get("text", "")),
                 str(data["from_id"]), str(name), created, self._next("order")))
            row = self._one("SELECT * FROM comments WHERE id = ?", comment_id)
        delivery = self._notify_comment(row, "add") if data.get("notify") else None
        return {"id": comment_id, **({"delivery": delivery} if delivery else {})}

    def _comment_change(self, data: dict, account: str, verb: str) -> dict:
        row = self._one("SELECT * FROM comments WHERE id = ? AND account = ?", str(data.get("id")), account)
        if row is None or row["object"] != "page":
            raise ValueError("a verb other than add needs the id of an existing Page comment")
        if verb == "edited":
            self.db.execute("UPDATE comments SET text = ? WHERE id = ?", (str(data.get("text", "")), row["id"]))
        elif verb in ("hide", "unhide"):
            self.db.execute("UPDATE comments SET hidden = ? WHERE id = ?", (verb == "hide", row["id"]))
        elif verb == "remove":
            self.db.execute("UPDATE comments SET removed = 1 WHERE id = ?", (row["id"],))
        else:
            raise ValueError("verb is add, edited, remove, hide or unhide")
        row = self._one("SELECT * FROM comments WHERE id = ?", row["id"])
        delivery = self._notify_comment(row, verb) if data.get("notify") else None
        return {"id": row["id"], **({"delivery": delivery} if delivery else {})}

    def _new_id(self, object: str, parent: str, *, post: bool = False) -> str:
        """A fresh id in Meta's shape: Instagram media and comments 17 digits; a Page post
        `<page-id>_<16 digits>` (parent: the Page), a Page comment `<post-digits>_<16 digits>`
        (parent: the post). The next one no comment, media or post holds yet, since a caller
        may have chosen ids in the same space."""
        while True:
            n = self._next("id")
            if object == "instagram":
                new = f"179{n:014d}" if not post else f"178{n:014d}"
            else:
                new = f"{parent.split('_')[-1]}_{10 ** 15 + n}"
            if self._one("SELECT id FROM comments WHERE id = ?", new) is None \
                    and self._one("SELECT id FROM media WHERE id = ?", new) is None:
                return new

    def _message_insert(self, *, object: str, account: str, sender: str, recipient: str, text: str,
                        at_ms: int, metadata: str | None = None, comment_id: str | None = None,
                        person_name: str | None = None) -> str:
        """Store one message of the account's conversation with a person; its id in Meta's shape."""
        person = recipient if sender == account else sender
        seq = self._next("order")
        mid = message_id(object, account, person, at_ms, seq)
        self.db.execute(
            "INSERT INTO messages (mid, account, sender, recipient, text, metadata, comment_id, created_ms,"
            " conversation, person, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (mid, account, sender, recipient, text, metadata, comment_id, at_ms,
             conversation_id(account, person, object), person, seq))
        if person_name:
            self._set_kv(f"person:{account}:{person}", person_name)
        return mid

    def message_create(self, data: dict) -> dict:
        """An inbound DM (or, with `to_id` and `from_id` the account, one the account sent)."""
        account, sender = str(data["account"]), str(data["from_id"])
        with self._tx():
            row = self._one("SELECT * FROM accounts WHERE id = ?", account)
            if row is None:
                self.account_upsert(id=account, object=str(data.get("object", "instagram")))
                row = self._one("SELECT * FROM accounts WHERE id = ?", account)
            recipient = str(data.get("to_id") or account)
            if sender != account and recipient != account:
                raise ValueError("a message is from or to the account")
            at_ms = int(float(data.get("created_time", time.time())) * 1000)
            text = str(data.get("text", ""))
            mid = self._message_insert(object=row["object"], account=account, sender=sender,
                                       recipient=recipient, text=text, at_ms=at_ms,
                                       person_name=data.get("from_name") or data.get("to_name"))
            conversation = self._one("SELECT conversation FROM messages WHERE mid = ?", mid)["conversation"]
        item = {"sender": {"id": sender}, "recipient": {"id": recipient}, "timestamp": at_ms,
                "message": {"mid": mid, "text": text, **({"is_echo": True} if sender == account else {})}}
        delivery = None
        field = "message_echoes" if sender == account and row["object"] == "page" else "messages"
        if data.get("notify") and self.subscribed(account, field):
            delivery = self._emit(row["object"], account, "messaging", item)
        return {"mid": mid, "conversation_id": conversation, **({"delivery": delivery} if delivery else {})}

    # -- reads -----------------------------------------------------------------------------
    def find(self, node: str) -> tuple[str, sqlite3.Row] | None:
        """What an id names: ("account"|"media"|"comment"|"message"|"conversation", row); a message
        and a conversation row carry their account's `object`."""
        with self.lock:
            for kind, table in (("account", "accounts"), ("media", "media"), ("comment", "comments")):
                row = self._one(f"SELECT * FROM {table} WHERE id = ?", node)
                if row is not None and not (kind == "comment" and row["removed"]):
                    return kind, row
            row = self._one("SELECT m.*, a.object FROM messages m JOIN accounts a ON a.id = m.account "
                            "WHERE m.mid = ?", node)
            if row is not None:
                return "message", row
            row = self._one("SELECT m.account, m.person, m.conversation, a.object FROM messages m "
                            "JOIN accounts a ON a.id = m.account WHERE m.conversation = ? LIMIT 1", node)
            if row is not None:
                return "conversation", row
        return None

    def conversations(self, accounts: list[str], person: str | None = None) -> list[dict]:
        """The accounts' conversations as rows for paging: {id, account, person, object, created
        (the last message's time, seconds), seq}."""
        with self.lock:
            marks = ",".join("?" * len(accounts)) or "NULL"
            rows = self._all(
                "SELECT m.conversation, m.account, m.person, a.object, MAX(m.created_ms) AS last_ms,"
                " MAX(m.seq) AS seq FROM messages m JOIN accounts a ON a.id = m.account"
                f" WHERE m.account IN ({marks}) AND (? IS NULL OR m.person = ?)"
                " GROUP BY m.conversation, m.account, m.person, a.object", *accounts, person, person)
        return [{"id": r["conversation"], "account": r["account"], "person": r["person"], "object": r["object"],
                 "created": r["last_ms"] / 1000, "seq": r["seq"]} for r in rows]

    def conversation_messages(self, conversation: str) -> list[dict]:
        """A conversation's messages, newest first, with their rank (0: the newest)."""
        with self.lock:
            rows = self._all("SELECT m.*, a.object FROM messages m JOIN accounts a ON a.id = m.account "
                             "WHERE m.conversation = ? ORDER BY m.created_ms DESC, m.seq DESC", conversation)
        return [{**dict(r), "created": r["created_ms"] / 1000, "rank": i} for i, r in enumerate(rows)]

    def message_rank(self, row: sqlite3.Row) -> int:
        """How many newer messages its conversation holds (0: the newest)."""
        with self.lock:
            return self._one("SELECT COUNT(*) AS n FROM messages WHERE conversation = ? AND "
                             "(created_ms > ? OR (created_ms = ? AND seq > ?))", row["conversation"],
                             row["created_ms"], row["created_ms"], row["seq"])["n"]

    def person_name(self, account: str, person: str) -> str:
        """A person's display name in an account's conversation: the one a comment or DM gave."""
        with self.lock:
            name = self._kv(f"person:{account}:{person}", "")
            if not name:
                row = self._one("SELECT from_name FROM comments WHERE account = ? AND from_id = ? LIMIT 1",
                                account, person)
                name = row["from_name"] if row else f"user_test_{person}"
        return name

    def media_list(self, account: str, since: float | None, until: float | None) -> list[sqlite3.Row]:
        with self.lock:
            rows = self._all("SELECT * FROM media WHERE account = ?", account)
        return [r for r in rows if (since is None or r["created"] >= since)
                and (until is None or r["created"] < until)]

    def comment_rows(self, *, media_id: str | None = None, parent_id: str | None = None) -> list[sqlite3.Row]:
        """Readable comments: not removed, and (Meta) never those on live media or ads."""
        with self.lock:
            if media_id is not None:
                rows = self._all("SELECT c.* FROM comments c JOIN media m ON m.id = c.media_id "
                                 "WHERE c.media_id = ? AND c.removed = 0 AND m.product_type != 'LIVE' "
                                 "AND m.ad_id IS NULL", media_id)
            else:
                rows = self._all("SELECT c.* FROM comments c JOIN media m ON m.id = c.media_id "
                                 "WHERE c.parent_id = ? AND c.removed = 0 AND m.product_type != 'LIVE' "
                                 "AND m.ad_id IS NULL", parent_id)
        return rows

    def media_row(self, media_id: str) -> sqlite3.Row | None:
        with self.lock:
            return self._one("SELECT * FROM media WHERE id = ?", media_id)

    def account_name(self, account: str) -> str:
        row = self.account(account)
        return row["name"] if row else account

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

    # -- faults and calls ------------------------------------------------------------------
    def fault_add(self, data: dict) -> dict:
        fault = Fault(data, self.hang_seconds)
        if fault.mode == "expire_cursors":
            self.expire_cursors()
        elif fault.mode == "clear":
            with self.lock:
                self.faults.clear()
        else:
            with self.lock:
                self.faults.append(fault)
        return {"mode": fault.mode, "count": fault.count}

    def fault_next(self, method: str, path: str, target: str = "") -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.count > 0 and fault.matches(method, path):
                    fault.count -= 1
                    if fault.count <= 0:
                        self.faults.remove(fault)
                    self.fault_log.append({"at": time.time(), "mode": fault.mode, "code": fault.code,
                                           "subcode": fault.subcode, "status": fault.status,
                                           "method": method, "path": path, "target": target})
                    return fault
        return None

    def faults_pending(self) -> int:
        with self.lock:
            return sum(f.count for f in self.faults)

    def call_record(self, method: str, path: str) -> None:
        with self.lock:
            self.calls[path] += 1
            self.call_log.append({"at": time.time(), "method": method, "path": path})

    # -- notifications ---------------------------------------------------------------------
    def _notify_comment(self, row: sqlite3.Row, verb: str, *, background: bool = False) -> dict | None:
        if row["object"] == "instagram":
            media = self.media_row(row["media_id"])
            field = "live_comments" if media["product_type"] == "LIVE" else "comments"
            value = {"id": row["id"], "text": row["text"],
                     "from": {"id": row["from_id"], "username": row["from_name"]},
                     "media": {"id": media["id"], "media_product_type": media["product_type"]}}
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
            value = {"from": {"id": row["from_id"], "name": row["from_name"]},
                     "post_id": row["media_id"], "comment_id": row["id"],
                     "created_time": int(row["created"]), "item": "comment",
                     "parent_id": row["parent_id"] or row["media_id"], "verb": verb,
                     "message": row["text"]}
            if verb == "remove":
                value.pop("message")
        if not self.subscribed(row["account"], field):
            return None
        return self._emit(row["object"], row["account"], "changes", {"field": field, "value": value},
                          background=background)

    def _emit(self, object: str, account: str, kind: str, item: dict, *, background: bool = False) -> dict | None:
        """Post one notification now, or queue it for /_sim/notify when batching.

        A Graph write's notifications (echoes, the account's own comments) go from a background
        thread: the sender's answer must not wait on the receiver, which may be waiting on the sender.
        """
        if not self.callback:
            return None
        with self._tx():
            self.db.execute("INSERT INTO pending (object, account, kind, item, at) VALUES (?, ?, ?, ?, ?)",
                            (object, account, kind, json.dumps(item), time.time()))
        if self.batch:
            return {"queued": True}
        if background:
            threading.Thread(target=self._flush_quietly, daemon=True).start()
            return {"queued": True}
        sent = self.flush()
        return sent[-1] if sent else None

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
                (row["at"], json.loads(row["item"])))
        results = []
        for object, entries in bodies.items():
            payload = {"object": object, "entry": []}
            for (account, kind), items in entries.items():
                latest = max(at for at, _ in items)
                entry_time = int(latest * 1000) if kind == "messaging" else int(latest)
                payload["entry"].append({"id": account, "time": entry_time, kind: [i for _, i in items]})
            results.append(self._post(payload, rows=[r for r in rows if r["object"] == object]))
        return results

    def _post(self, payload: dict, *, rows: list) -> dict:
        body = encode_body(payload)
        request = urllib.request.Request(self.callback, data=body, method="POST", headers={
            "Content-Type": "application/json",
            "X-Hub-Signature-256": sign_body(body, self.app_secret),
            "X-Hub-Signature": "sha1=" + hmac.new(self.app_secret.encode(), body, hashlib.sha1).hexdigest(),
            "User-Agent": "facebookexternalua"})
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
                    self.db.execute("INSERT INTO pending (object, account, kind, item, at) "
                                    "VALUES (?, ?, ?, ?, ?)",
                                    (row["object"], row["account"], row["kind"], row["item"], row["at"]))
        result = {"status": status, "entries": len(payload["entry"]),
                  "body_sha256": hashlib.sha256(body).hexdigest(), "answer": answer.decode("utf-8", "replace")}
        with self.lock:
            self.deliveries.append(result)
        return result

    # -- writes ----------------------------------------------------------------------------
    def applied(self) -> dict:
        with self.lock:
            rows = self._all("SELECT * FROM applied")
        result: dict[str, dict[str, int]] = {"public": {}, "private": {}}
        for row in rows:
            result[row["kind"]][row["comment_id"]] = row["n"]
        return result

    def private_replied(self, comment_id: str) -> bool:
        """Whether a private reply to this comment was applied."""
        with self.lock:
            return self._one("SELECT n FROM applied WHERE kind = 'private' AND comment_id = ?",
                             comment_id) is not None

    def _count_applied(self, kind: str, comment_id: str) -> None:
        self.db.execute("INSERT INTO applied (kind, comment_id, n) VALUES (?, ?, 1) "
                        "ON CONFLICT(kind, comment_id) DO UPDATE SET n = n + 1", (kind, comment_id))

    def public_reply(self, *, comment_id: str, message: str, host: str) -> dict:
        """Reply on the comment's thread as the account; a reply to a reply lands on the top level."""
        with self._tx():
            target = self._one("SELECT * FROM comments WHERE id = ? AND removed = 0", comment_id)
            if target is None:
                raise not_found(comment_id)
            media = self._one("SELECT * FROM media WHERE id = ?", target["media_id"])
            if target["hidden"] or media["product_type"] == "LIVE":
                raise GraphError(100, message="(#100) This comment cannot be replied to.")
            if not message:
                raise GraphError(100, message="(#100) The parameter message is required")
            top = target["parent_id"] or target["id"]
            new_id = self._new_id(target["object"], target["media_id"])
            account = target["account"]
            self.db.execute(
                "INSERT INTO comments (id, account, object, media_id, parent_id, text, from_id, from_name,"
                " created, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (new_id, account, target["object"], target["media_id"], top, message, account,
                 self._one("SELECT name FROM accounts WHERE id = ?", account)["name"], time.time(),
                 self._next("order")))
            self._count_applied("public", comment_id)
            row = self._one("SELECT * FROM comments WHERE id = ?", new_id)
        self._notify_comment(row, "add", background=True)  # the account's own comments are notified too
        return {"id": new_id}

    def private_reply(self, *, node: str, host: str, body: dict) -> dict:
        recipient = body.get("recipient") or {}
        message = body.get("message") or {}
        comment_id = str(recipient.get("comment_id") or "")
        text = str(message.get("text") or "")
        if not comment_id or not text:
            raise GraphError(100, message="(#100) The parameter recipient.comment_id and message.text are required")
        metadata = message.get("metadata")
        with self._tx():
            comment = self._one("SELECT * FROM comments WHERE id = ? AND removed = 0", comment_id)
            sender = self._one("SELECT * FROM accounts WHERE id = ?", node)
            if sender is not None and host == "facebook" and sender["object"] == "instagram":
                # Instagram through Facebook Login sends from the Page node; Meta answers the IG
                # node on graph.facebook.com with (#3), as recorded on every such private reply.
                raise GraphError(3)
            if comment is None or sender is None:
                raise not_found(comment_id if sender else node)
            owner = comment["account"]
            # A Page token sends for the Page and for the Instagram account linked to it.
            linked = self._one("SELECT * FROM accounts WHERE id = ?", owner)
            if node != owner and not (linked and linked["page_id"] == node):
                raise GraphError(100, subcode=2534025, message="(#100) The comment is not valid for a private reply")
            messenger = comment["object"] == "page"
            if comment["from_id"] == owner:
                raise GraphError(100, subcode=2534025, message="(#100) The comment is not valid for a private reply")
            if time.time() - comment["created"] > PRIVATE_REPLY_WINDOW:
                raise GraphError(10, subcode=2018278 if messenger else 2534022,
                                 message="(#10) This message is sent outside of allowed window.")
            if self._one("SELECT n FROM applied WHERE kind = 'private' AND comment_id = ?", comment_id):
                raise GraphError(10900, message="(#10900) Activity already replied to")
            at_ms = int(time.time() * 1000)
            # The answer's message_id is the message's id in the conversation with the commenter.
            mid = self._message_insert(object=comment["object"], account=owner, sender=owner,
                                       recipient=comment["from_id"], text=text, at_ms=at_ms,
                                       metadata=None if metadata is None else str(metadata),
                                       comment_id=comment_id, person_name=comment["from_name"])
            self._count_applied("private", comment_id)
        echo = {"mid": mid, "text": text, "is_echo": True}
        if messenger:
            # Messenger echoes carry the app and the metadata, and need message_echoes.
            echo["app_id"] = self.app_id or ""
            if metadata is not None:
                echo["metadata"] = str(metadata)
            field = "message_echoes"
        else:
            # Instagram: echoes arrive inside `messages`; metadata is undocumented there, so
            # the simulator does not echo it (Conduit must not rely on it).
            field = "messages"
        if self.subscribed(owner, field):
            self._emit(comment["object"], owner, "messaging",
                       {"sender": {"id": owner}, "recipient": {"id": comment["from_id"]},
                        "timestamp": at_ms, "message": echo}, background=True)
        return {"recipient_id": comment["from_id"], "message_id": mid}


class _Transaction:
    """BEGIN IMMEDIATE/COMMIT under the state lock; nested uses join the outer transaction."""

    def __init__(self, state: SimulatorState) -> None:
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


def _limit(query: dict, cap: int, default: int = DEFAULT_LIMIT) -> int:
    try:
        return max(1, min(cap, int(query.get("limit", [str(default)])[0])))
    except ValueError:
        raise GraphError(100, message="(#100) Param limit must be a number") from None


def _key(row) -> tuple[float, int]:
    return (row["created"], row["seq"])


def _page(state: SimulatorState, rows: list, query: dict, *, newest_first: bool,
          cap: int, render, base_url: str, path: str, before: bool = True, always: bool = True) -> dict:
    """One page of rows by (created, seq), cursor-paged: `paging.cursors.{before,after}` and `next`
    (absent on the last page). `before=False`: only `cursors.after`, and `always=False`: no paging
    at all on a single page (the conversation endpoints, as recorded)."""
    limit = _limit(query, cap)
    ordered = sorted(rows, key=_key, reverse=newest_first)
    after = query.get("after", [""])[0]
    if after:
        position = state.cursor_decode(after)
        ordered = [r for r in ordered if (_key(r) < position if newest_first else _key(r) > position)]
    page, more = ordered[:limit], len(ordered) > limit
    result: dict = {"data": [render(r) for r in page]}
    if page and (always or more or after):
        cursors = {"before": state.cursor_encode(_key(page[0]))} if before else {}
        cursors["after"] = state.cursor_encode(_key(page[-1]))
        paging: dict = {"cursors": cursors}
        if more:
            params = {k: v[0] for k, v in query.items() if k != "after"}
            params["after"] = cursors["after"]
            paging["next"] = f"{base_url}{path}?{urlencode(params)}"
        result["paging"] = paging
    return result


TIME_PAGING_PARAMS = ("since", "until", "__paging_token", "__previous", "after", "before")


def _time_page(state: SimulatorState, rows: list, query: dict, *, cap: int, render, base_url: str,
               path: str) -> dict:
    """One page of a time-paged list (`/feed`, `/posts`), newest first, as recorded from Meta:
    `paging.previous` = the request with `since=<newest item's time>&__paging_token=..&__previous=1`,
    `paging.next` = the request with `until=<oldest item's time>&__paging_token=..`; no `cursors`;
    no `next` on the last page. `until` alone bounds the list exclusively (Conduit's window); with a
    `__paging_token` it is inclusive and the token places the page edge within that second."""
    limit = _limit(query, cap)
    value = lambda name: query.get(name, [""])[0]
    since = parse_time(value("since")) if value("since") else None
    until = parse_time(value("until")) if value("until") else None
    token = value("__paging_token")
    position = state.paging_token_decode(token) if token else None
    backwards = bool(value("__previous")) and position is not None
    ordered = sorted(rows, key=_key, reverse=True)
    if position is None:
        ordered = [r for r in ordered if (since is None or r["created"] >= since)
                   and (until is None or r["created"] < until)]
    elif backwards:
        ordered = [r for r in ordered if _key(r) > position and (since is None or r["created"] >= since)]
    else:
        ordered = [r for r in ordered if _key(r) < position and (until is None or r["created"] <= until)
                   and (since is None or r["created"] >= since)]
    page = ordered[-limit:] if backwards else ordered[:limit]
    more = len(ordered) > limit if not backwards else True
    result: dict = {"data": [render(r) for r in page]}
    if page:
        base = [(k, v[0]) for k, v in query.items() if k not in TIME_PAGING_PARAMS]
        kept_since = [("since", value("since"))] if value("since") and not backwards else []
        previous = base + [("since", str(int(page[0]["created"]))),
                           ("__paging_token", state.paging_token_encode(_key(page[0]))), ("__previous", "1")]
        paging = {"previous": f"{base_url}{path}?{urlencode(previous)}"}
        if more and not backwards:
            following = base + kept_since + [("until", str(int(page[-1]["created"]))),
                                             ("__paging_token", state.paging_token_encode(_key(page[-1])))]
            paging["next"] = f"{base_url}{path}?{urlencode(following)}"
        result["paging"] = paging
    return result


def _select(item: dict, fields: set[str] | None, default: set[str]) -> dict:
    wanted = (fields or default) | {"id"}
    return {k: v for k, v in item.items() if k in wanted}


def _sub(tree: dict | None, name: str, default: str) -> set[str]:
    """The subfields asked of `name` (`from{id,username}`), or its default."""
    sub = (tree or {}).get(name, (None, {}))[0]
    return set(field_tree(sub or default))


def _shortcode(media_id: str) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    digest = hashlib.sha256(media_id.encode()).digest()
    return "".join(alphabet[b % 64] for b in digest[:11])


class Router:
    """Graph routes: resolve (method, host, node, edge) to an answer or a GraphError."""

    def __init__(self, state: SimulatorState) -> None:
        self.state = state

    # -- comments, media, posts -------------------------------------------------------------
    def ig_comment(self, row: sqlite3.Row, fields: str | None, *, nested: bool = True) -> dict:
        tree = field_tree(fields) if fields else None
        media = self.state.media_row(row["media_id"])
        author = {"id": row["from_id"], "username": row["from_name"]}
        item = {"id": row["id"], "text": row["text"], "timestamp": iso(row["created"]),
                "username": row["from_name"],
                "from": {k: v for k, v in author.items() if k in _sub(tree, "from", "id,username")},
                "media": {k: v for k, v in {"id": media["id"], "media_product_type": media["product_type"]}.items()
                          if k in _sub(tree, "media", "id")},
                "hidden": bool(row["hidden"]), "like_count": 0}
        if row["from_id"] == row["account"]:
            item["user"] = {"id": row["account"]}  # Meta: only on the app user's own comments
        if row["parent_id"]:
            item["parent_id"] = row["parent_id"]
        if nested and tree and "replies" in tree:
            replies = sorted(self.state.comment_rows(parent_id=row["id"]), key=_key, reverse=True)
            sub = tree["replies"][0] or "id,text,timestamp"
            item["replies"] = {"data": [self.ig_comment(r, sub, nested=False) for r in replies]}
        return _select(item, set(tree) if tree else None, {"id", "text", "timestamp"})

    def page_comment(self, row: sqlite3.Row, fields: str | None) -> dict:
        tree = field_tree(fields) if fields else None
        replied = self.state.private_replied(row["id"])
        author = {"id": row["from_id"], "name": row["from_name"]}
        item = {"id": row["id"], "message": row["text"], "created_time": iso(row["created"]),
                "from": {k: v for k, v in author.items() if k in _sub(tree, "from", "name,id")},
                "is_hidden": bool(row["hidden"]),
                # One private reply per comment: none is possible after one.
                "can_reply_privately": row["from_id"] != row["account"] and not replied
                and time.time() - row["created"] <= PRIVATE_REPLY_WINDOW}
        if replied:
            # Graph omits a field with no value: the conversation appears only once there is one.
            item["private_reply_conversation"] = {"id": conversation_id(row["account"], row["from_id"])}
        if row["parent_id"]:
            item["parent"] = {"id": row["parent_id"]}
        return _select(item, set(tree) if tree else None, {"id", "message", "created_time", "from"})

    def media(self, row: sqlite3.Row, fields: str | None) -> dict:
        tree = field_tree(fields) if fields else None
        if row["object"] == "instagram":
            product = row["product_type"]
            item = {"id": row["id"], "timestamp": iso(row["created"]), "media_product_type": product,
                    "media_type": "VIDEO" if product in ("REELS", "LIVE") else "IMAGE",
                    "media_url": f"https://scontent.example.invalid/v/t51.29350-15/{row['id']}_n.jpg",
                    "permalink": f"https://www.instagram.com/p/{_shortcode(row['id'])}/",
                    "like_count": 0, "comments_count": len(self.state.comment_rows(media_id=row["id"]))}
            return _select(item, set(tree) if tree else None, {"id"})
        item = {"id": row["id"], "created_time": iso(row["created"]), "updated_time": iso(row["created"]),
                "message": ""}
        return _select(item, set(tree) if tree else None, {"id", "created_time", "message"})

    def comments_summary(self, rows: list, query: dict, newest: bool) -> dict:
        """`summary=true` on a Page comment edge: order, total_count, can_comment (as recorded)."""
        order = query.get("order", [""])[0] or (
            "chronological" if query.get("filter", [""])[0] == "stream" else "ranked")
        return {"order": "reverse_chronological" if newest else order, "total_count": len(rows),
                "can_comment": True}

    # -- conversations and messages -----------------------------------------------------------
    def person(self, object: str, account: str, who: str) -> dict:
        """A participant as the Conversations API names one: Instagram {username, id}; Messenger
        {name, email, id} (the email is `<psid>@facebook.com`, as recorded)."""
        name = self.state.account_name(who) if who == account else self.state.person_name(account, who)
        if object == "instagram":
            return {"username": name, "id": who}
        return {"name": name, "email": f"{who}@facebook.com", "id": who}

    def message(self, row, fields: set[str] | None, *, details: bool = True) -> dict:
        item = {"id": row["mid"], "created_time": iso(row["created_ms"] / 1000)}
        if details:
            recipient = self.person(row["object"], row["account"], row["recipient"])
            item.update({"from": self.person(row["object"], row["account"], row["sender"]),
                         "to": {"data": [recipient]}, "message": row["text"], "is_unsupported": False})
        return _select(item, fields, {"id", "created_time"})

    def message_edge(self, conversation: str, sub: str | None, opts: dict, base_url: str, root: str,
                     token: str = "") -> dict:
        """A conversation's `messages`, newest first; details only for the 20 most recent (Meta:
        "You can only get details about the 20 most recent messages"): older ones keep id and time.
        `next` is `/{conversation-id}/messages` with the same subfields."""
        rows = self.state.conversation_messages(conversation)
        fields = set(field_tree(sub)) if sub else None
        edge_query = {name: [opts[name]] for name in ("limit", "after") if name in opts}
        if sub:
            edge_query["fields"] = [sub]
        if token:
            edge_query["access_token"] = [token]  # Meta's links carry the request's token
        return _page(self.state, rows, edge_query, newest_first=True, cap=MAX_MEDIA_PAGE, base_url=base_url,
                     path=f"{root}/{conversation}/messages", before=False, always=False,
                     render=lambda r: self.message(r, fields, details=r["rank"] < MESSAGE_DETAILS_WINDOW))

    def conversation(self, row, fields: str | None, base_url: str, root: str, token: str) -> dict:
        tree = field_tree(fields) if fields else {"id": (None, {})}
        item: dict = {}
        if "messages" in tree:
            sub, opts = tree["messages"]
            item["messages"] = self.message_edge(row["conversation"], sub, opts, base_url, root, token)
        if "participants" in tree:
            item["participants"] = {"data": [self.person(row["object"], row["account"], row["person"]),
                                             self.person(row["object"], row["account"], row["account"])]}
        if "updated_time" in tree:
            last = self.state.conversation_messages(row["conversation"])
            item["updated_time"] = iso(last[0]["created"]) if last else None
        item["id"] = row["conversation"]
        return item

    def conversation_list(self, host: str, account: sqlite3.Row, query: dict, base_url: str, path: str,
                          root: str) -> dict:
        platform = query.get("platform", [""])[0]
        if platform and platform not in ("instagram", "messenger"):
            raise GraphError(100, message="(#100) param platform must be one of {INSTAGRAM, MESSENGER}")
        if account["object"] == "instagram":
            if host != "instagram":
                # Unverified: the documented Facebook Login route is /{page-id}/conversations.
                raise GraphError(100, message="(#100) Tried accessing nonexisting field (conversations)")
            accounts = [account["id"]]
        elif (platform or "messenger") == "instagram":
            # A Page token reaches the Instagram account linked to the Page.
            with self.state.lock:
                linked = self.state._all("SELECT id FROM accounts WHERE page_id = ?", account["id"])
            accounts = [r["id"] for r in linked]
        else:
            accounts = [account["id"]]
        person = query.get("user_id", [""])[0] or None
        rows = self.state.conversations(accounts, person)
        tree = field_tree(query.get("fields", [""])[0]) if query.get("fields", [""])[0] else None

        def render(r: dict) -> dict:
            item: dict = {"id": r["id"], "updated_time": iso(r["created"])}
            if tree and "participants" in tree:
                item["participants"] = {"data": [self.person(r["object"], r["account"], r["person"]),
                                                 self.person(r["object"], r["account"], r["account"])]}
            if tree and "messages" in tree:
                sub, opts = tree["messages"]
                item["messages"] = self.message_edge(r["id"], sub, opts, base_url, root,
                                                     query.get("access_token", [""])[0])
            return _select(item, set(tree) if tree else None, {"id", "updated_time"})

        return _page(self.state, rows, query, newest_first=True, cap=MAX_MEDIA_PAGE, render=render,
                     base_url=base_url, path=path, before=False, always=False)

    # -- the routes ---------------------------------------------------------------------------
    def get(self, host: str, node: str, edge: str | None, query: dict, base_url: str, path: str) -> dict:
        if node == "debug_token" and edge is None and host != "instagram":
            # The Facebook host's token inspection (graph.instagram.com has none).
            return {"data": {"is_valid": self.state.token_valid, "expires_at": self.state.token_expires_at,
                             "type": "PAGE", "app_id": self.state.app_id or ""}}
        found = self.state.find(node)
        if found is None:
            raise not_found(node)
        kind, row = found
        if host == "instagram" and row["object"] != "instagram":
            raise not_found(node)  # Page and Messenger objects live on the Facebook host only
        fields = query.get("fields", [""])[0] or None
        # The path up to the version ("/v26.0", "/instagram/v26.0"): where other nodes' links start.
        root = "/" + "/".join(path.strip("/").split("/")[:2 if host == "instagram" else 1])
        since = parse_time(query["since"][0]) if query.get("since") else None
        until = parse_time(query["until"][0]) if query.get("until") else None
        page = lambda rows, newest_first, cap, render: _page(
            self.state, rows, query, newest_first=newest_first, cap=cap, render=render,
            base_url=base_url, path=path)
        if edge is None:
            if kind == "account":
                return {"id": row["id"], ("username" if row["object"] == "instagram" else "name"): row["name"]}
            if kind == "media":
                return self.media(row, fields)
            if kind == "conversation":
                return self.conversation(row, fields, base_url, root, query.get("access_token", [""])[0])
            if kind == "message":
                if self.state.message_rank(row) >= MESSAGE_DETAILS_WINDOW:
                    # Meta: "an error will be returned stating that the message has been deleted"
                    # (its code is not recorded; 100 is Graph's code for an object it will not load).
                    raise GraphError(100, message="(#100) This message has been deleted.")
                return self.message(row, set(field_tree(fields)) if fields else None)
            return (self.ig_comment(row, fields) if row["object"] == "instagram"
                    else self.page_comment(row, fields))
        if edge == "subscribed_apps" and kind == "account":
            return {"data": self.state.subscribed_apps(node)}
        if edge == "conversations" and kind == "account":
            return self.conversation_list(host, row, query, base_url, path, root)
        if kind == "account" and row["object"] == "instagram" and edge == "media":
            return page(self.state.media_list(node, since, until), True, MAX_MEDIA_PAGE,
                        lambda r: self.media(r, fields))
        if kind == "account" and row["object"] == "page" and edge in ("feed", "posts"):
            if self.state.feed_paging(node) == "cursor":
                return page(self.state.media_list(node, since, until), True, MAX_MEDIA_PAGE,
                            lambda r: self.media(r, fields))
            return _time_page(self.state, self.state.media_list(node, None, None), query, cap=MAX_MEDIA_PAGE,
                              render=lambda r: self.media(r, fields), base_url=base_url, path=path)
        if kind == "media" and edge == "comments":
            rows = self.state.comment_rows(media_id=node)
            if row["object"] == "instagram":
                return page([r for r in rows if not r["parent_id"]], True, MAX_COMMENTS_PAGE,
                            lambda r: self.ig_comment(r, fields))
            if query.get("filter", [""])[0] != "stream":
                rows = [r for r in rows if not r["parent_id"]]
            newest = query.get("order", ["chronological"])[0] == "reverse_chronological"
            answer = page(rows, newest, MAX_COMMENTS_PAGE, lambda r: self.page_comment(r, fields))
            if query.get("summary", [""])[0] in ("true", "1"):
                answer["summary"] = self.comments_summary(rows, query, newest)
            return answer
        if kind == "comment" and row["object"] == "instagram" and edge == "replies":
            return page(self.state.comment_rows(parent_id=node), True, MAX_COMMENTS_PAGE,
                        lambda r: self.ig_comment(r, fields, nested=False))
        if kind == "comment" and row["object"] == "page" and edge == "comments":
            newest = query.get("order", ["chronological"])[0] == "reverse_chronological"
            rows = self.state.comment_rows(parent_id=node)
            answer = page(rows, newest, MAX_COMMENTS_PAGE, lambda r: self.page_comment(r, fields))
            if query.get("summary", [""])[0] in ("true", "1"):
                answer["summary"] = self.comments_summary(rows, query, newest)
            return answer
        if kind == "conversation" and edge == "messages":
            return self.message_edge(row["conversation"], fields,
                                     {k: v[0] for k, v in query.items() if k in ("limit", "after")},
                                     base_url, root, query.get("access_token", [""])[0])
        raise GraphError(100, message=f"(#100) Tried accessing nonexisting field ({edge})")

    def post(self, host: str, node: str, edge: str | None, params: dict) -> dict:
        found = self.state.find(node)
        if found is None:
            raise not_found(node)
        kind, row = found
        if host == "instagram" and row["object"] != "instagram":
            raise not_found(node)
        if kind == "comment" and row["object"] == "instagram" and edge == "replies":
            return self.state.public_reply(comment_id=node, message=str(params.get("message") or ""), host=host)
        if kind == "comment" and row["object"] == "page" and edge == "comments":
            return self.state.public_reply(comment_id=node, message=str(params.get("message") or ""), host=host)
        if kind == "account" and edge == "messages":
            return self.state.private_reply(node=node, host=host, body=params)
        raise GraphError(100, message=f"(#100) Unsupported post request ({edge})")


def _graph_path(path: str) -> tuple[str, list[str]] | None:
    """("facebook"|"instagram", segments after the version) for a Graph path, else None."""
    segments = [unquote(p) for p in path.strip("/").split("/") if p]
    host = "facebook"
    if segments and segments[0] == "instagram":
        host, segments = "instagram", segments[1:]
    if not segments or not VERSION.match(segments[0]) or len(segments) not in (2, 3):
        return None
    return host, segments[1:]


def _write_target(parsed: tuple[str, list[str]] | None, raw: bytes, query: dict) -> str:
    """The comment a write concerns: the path's node for a public reply, `recipient.comment_id` of a
    private reply (query, JSON or form-encoded body); "" when it cannot be read."""
    if parsed is None:
        return ""
    segments = parsed[1]
    if segments[1:] != ["messages"]:
        return segments[0]
    try:
        text = raw.decode()
        body = {k: v[0] for k, v in query.items()}
        if text:
            body.update(json.loads(text) if text.startswith("{") else
                        {k: v[0] for k, v in parse_qs(text).items()})
        recipient = body.get("recipient")
        recipient = json.loads(recipient) if isinstance(recipient, str) else recipient
        return str(recipient.get("comment_id") or "")
    except (ValueError, AttributeError, UnicodeDecodeError):
        return ""


def _business_usage(state: SimulatorState, path: str, fault: Fault) -> str:
    """X-Business-Use-Case-Usage for a throttled answer, keyed by the account the call concerns."""
    parsed = _graph_path(path)
    node = parsed[1][0] if parsed else ""
    found = state.find(node)
    account, object = node, "pages"
    if found:
        kind, row = found
        account = row["id"] if kind == "account" else row["account"]
        object = "instagram" if row["object"] == "instagram" else "pages"
    if fault.code == 80006:
        object = "messenger"
    count = fault.call_count if fault.mode == "usage" else 100
    return json.dumps({account: [{"type": object, "call_count": count, "total_cputime": 10, "total_time": 10,
                                  "estimated_time_to_regain_access": int(fault.retry_minutes or 0)}]})


def make_handler(state: SimulatorState) -> type[BaseHTTPRequestHandler]:
    router = Router(state)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args) -> None:  # quiet: tokens ride in query strings
            pass

        def _json(self, status: int, payload: object, headers: dict | None = None) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _raw_body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _control_body(self, raw: bytes) -> dict:
            data = json.loads(raw or b"{}")
            if not isinstance(data, dict):
                raise ValueError("the body is a JSON object")
            return data

        def _base_url(self) -> str:
            return f"http://{self.headers.get('Host') or f'127.0.0.1:{self.server.server_address[1]}'}"

        def _control(self, method: str, name: str, raw: bytes) -> None:
            try:
                data = self._control_body(raw) if method == "POST" else {}
                if (method, name) == ("POST", "accounts"):
                    row = state.account_upsert(id=str(data["id"]), object=str(data.get("object", "instagram")),
                                               app_id=data.get("app_id"),
                                               subscribed_fields=data.get("subscribed_fields"),
                                               name=data.get("username") or data.get("name"),
                                               page_id=data.get("page_id"), feed_paging=data.get("feed_paging"))
                    return self._json(200, {"id": row["id"], "object": row["object"]})
                if (method, name) == ("POST", "media"):
                    object = str(data.get("object", "instagram"))
                    state.account_upsert(id=str(data["account"]), object=object)
                    row = state.media_upsert(account=str(data["account"]), id=str(data.get("id") or ""),
                                             object=object, product_type=data.get("media_product_type"),
                                             ad_id=data.get("ad_id"),
                                             created=float(data["created_time"]) if data.get("created_time") else None)
                    return self._json(200, {"id": row["id"]})
                if (method, name) == ("POST", "comments"):
                    return self._json(200, state.comment_create(data))
                if (method, name) == ("POST", "messages"):
                    return self._json(200, state.message_create(data))
                if (method, name) == ("POST", "subscriptions"):
                    state.subscription_set(account=str(data["account"]), app_id=str(data["app_id"]),
                                           fields=list(data.get("fields", [])))
                    return self._json(200, {"data": state.subscribed_apps(str(data["account"]))})
                if (method, name) == ("POST", "token"):
                    state.token_expires_at = int(data.get("expires_at", 0))
                    state.token_valid = bool(data.get("is_valid", True))
                    return self._json(200, {"expires_at": state.token_expires_at, "is_valid": state.token_valid})
                if (method, name) == ("POST", "faults"):
                    return self._json(200, state.fault_add(data))
                if (method, name) == ("DELETE", "faults"):
                    return self._json(200, state.fault_add({"mode": "clear"}))
                if (method, name) == ("GET", "faults"):
                    with state.lock:
                        return self._json(200, {"pending": sum(f.count for f in state.faults),
                                                "fired": list(state.fault_log)})
                if (method, name) == ("GET", "calls"):
                    with state.lock:
                        return self._json(200, {"calls": sum(state.calls.values()),
                                                "by_path": dict(state.calls), "log": list(state.call_log)})
                if (method, name) == ("DELETE", "calls"):
                    with state.lock:
                        state.calls.clear()
                        state.call_log.clear()
                    return self._json(200, {"calls": 0})
                if (method, name) == ("POST", "notify"):
                    return self._json(200, {"sent": state.flush()})
                if (method, name) == ("GET", "notifications"):
                    with state.lock:
                        return self._json(200, {"deliveries": list(state.deliveries)})
                if (method, name) == ("GET", "applied"):
                    return self._json(200, state.applied())
            except (KeyError, ValueError, TypeError) as exc:
                return self._json(400, {"error": f"bad control request: {exc}"})
            self._json(404, {"error": f"no control route {method} /_sim/{name}"})

        def _graph(self, method: str, raw: bytes) -> None:
            split = urlsplit(self.path)
            parsed = _graph_path(split.path)
            query = parse_qs(split.query)
            state.call_record(method, split.path)
            fault = state.fault_next(method, split.path, _write_target(parsed, raw, query) if method == "POST" else "")
            if fault and fault.latency:
                time.sleep(fault.latency)
            if fault and fault.mode in ("timeout", "drop"):
                if fault.mode == "timeout":
                    state.stopping.wait(fault.hang)
                self.close_connection = True
                return
            if fault and fault.mode == "error":
                return self._error(fault.error(), split.path, fault)
            try:
                token = query.get("access_token", [""])[0] or self.headers.get("Authorization", "").removeprefix(
                    "Bearer ").strip()
                if parsed is None:
                    raise GraphError(100, message="(#100) Unknown path components")
                if not token:
                    # The contract's choice: 190 (credentials). Meta's live answer to a MISSING token
                    # is observed as OAuthException 104; a client should treat both as credentials.
                    raise GraphError(190, message="An access token is required to request this resource.",
                                     full=True)
                host, segments = parsed
                node, edge = segments[0], (segments[1] if len(segments) > 1 else None)
                if method == "GET":
                    answer = router.get(host, node, edge, query, self._base_url(), split.path)
                else:
                    params = {k: v[0] for k, v in query.items()}
                    content_type = self.headers.get("Content-Type", "")
                    if raw and "json" in content_type:
                        params.update(json.loads(raw))
                    elif raw:
                        params.update({k: v[0] for k, v in parse_qs(raw.decode()).items()})
                    for key in ("recipient", "message"):  # the Send API takes these JSON-encoded too
                        if isinstance(params.get(key), str) and params[key].startswith("{"):
                            params[key] = json.loads(params[key])
                    answer = router.post(host, node, edge, params)
            except GraphError as exc:
                return self._error(exc, split.path, None)
            except (ValueError, TypeError):
                return self._error(GraphError(100, message="(#100) Invalid parameter"), split.path, None)
            if fault and fault.mode == "apply_then_error":
                return self._error(fault.error(), split.path, fault)
            if fault and fault.mode == "apply_then_timeout":
                state.stopping.wait(fault.hang)
                self.close_connection = True
                return
            if fault and fault.mode == "apply_then_drop":
                self.close_connection = True
                return
            if fault and fault.mode == "usage":
                return self._json(200, answer, {"X-Business-Use-Case-Usage": _business_usage(state, split.path, fault)})
            self._json(200, answer)

        def _error(self, error: GraphError, path: str, fault: Fault | None) -> None:
            headers = {"WWW-Authenticate": 'OAuth "Facebook Platform" "invalid_token"'} if error.code == 190 else {}
            if fault is not None and fault.retry_minutes is not None:
                headers["X-Business-Use-Case-Usage"] = _business_usage(state, path, fault)
            parsed = _graph_path(path)
            self._json(error.status, error.envelope(parsed[0] if parsed else "facebook"), headers)

        def _dispatch(self, method: str) -> None:
            raw = self._raw_body() if method == "POST" else b""
            path = urlsplit(self.path).path
            if path.startswith("/_sim/"):
                return self._control(method, path.removeprefix("/_sim/").strip("/"), raw)
            self._graph(method, raw)

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        def do_DELETE(self) -> None:
            path = urlsplit(self.path).path
            if path.startswith("/_sim/"):
                return self._control("DELETE", path.removeprefix("/_sim/").strip("/"), b"")
            self._json(400, GraphError(100, message="(#100) Unsupported delete request").envelope())

    return Handler


class GraphSimulator:
    """A running simulator: `.port`, `.url` (Facebook host), `.instagram_url`, `.state`, `.close()`."""

    def __init__(self, server: ThreadingHTTPServer, state: SimulatorState, version: str) -> None:
        self.server, self.state, self.version = server, state, version
        self.port = server.server_address[1]
        self.root = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.root}/{version}"
        self.instagram_url = f"{self.root}/instagram/{version}"
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)

    def control(self, path: str, body: dict | None = None, *, method: str = "POST") -> dict:
        """Call the control API over HTTP, as a test or the demo would (`path` like "/_sim/comments")."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.root}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"{}")

    def close(self) -> None:
        self.state.stopping.set()  # release any request held by a timeout fault
        self.server.shutdown()
        self.server.server_close()
        self.state.close()

    def __enter__(self) -> "GraphSimulator":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def serve(*, port: int = 0, host: str = "127.0.0.1", state_path: str | None = None,
          callback: str | None = None, app_id: str | None = None, app_secret: str | None = None,
          batch: bool = False, hang_seconds: float = 15.0, version: str = "v26.0") -> GraphSimulator:
    """Start the simulator on host:port (loopback only; port 0: any free port) in a background thread."""
    if not is_loopback_host(host):
        raise ValueError(f"the Graph simulator binds loopback only, not {host!r}")
    state = SimulatorState(state_path=state_path, callback=callback, app_id=app_id, app_secret=app_secret,
                           batch=batch, hang_seconds=hang_seconds)
    server = ThreadingHTTPServer((host, port), make_handler(state))
    server.daemon_threads = True
    simulator = GraphSimulator(server, state, version)
    simulator._thread.start()
    return simulator
