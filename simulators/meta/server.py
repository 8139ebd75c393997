"""The simulator's HTTP server: Graph paths and the `/_sim/` control API on one loopback port."""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from simulators.meta.errors import GraphError
from simulators.meta.faults import Fault
from simulators.meta.login import LoginRefusal
from simulators.meta.routes import Router
from simulators.meta.state import SimulatorState
from simulators.meta.store import is_loopback_host
from simulators.meta.whatsapp import whatsapp_control, whatsapp_send_body, whatsapp_target

VERSION = re.compile(r"^v\d+\.\d+$")


def _graph_path(path: str) -> tuple[str, list[str]] | None:
    """("facebook"|"instagram", segments after the version) for a Graph path, else None."""
    segments = [unquote(p) for p in path.strip("/").split("/") if p]
    host = "facebook"
    if segments and segments[0] == "instagram":
        host, segments = "instagram", segments[1:]
        if segments in (["refresh_access_token"], ["access_token"]):  # documented without a version
            return host, segments
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
            body.update(
                json.loads(text) if text.startswith("{") else {k: v[0] for k, v in parse_qs(text).items()}
            )
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
    return json.dumps(
        {
            account: [
                {
                    "type": object,
                    "call_count": count,
                    "total_cputime": 10,
                    "total_time": 10,
                    "estimated_time_to_regain_access": int(fault.retry_minutes or 0),
                }
            ]
        }
    )


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
                if name.startswith("whatsapp/"):
                    return self._json(*whatsapp_control(state, method, name.removeprefix("whatsapp/"), data))
                if (method, name) == ("POST", "accounts"):
                    row = state.account_upsert(
                        id=str(data["id"]),
                        object=str(data.get("object", "instagram")),
                        app_id=data.get("app_id"),
                        subscribed_fields=data.get("subscribed_fields"),
                        name=data.get("username") or data.get("name"),
                        page_id=data.get("page_id"),
                        feed_paging=data.get("feed_paging"),
                    )
                    return self._json(200, {"id": row["id"], "object": row["object"]})
                if (method, name) == ("POST", "media"):
                    object = str(data.get("object", "instagram"))
                    state.account_upsert(id=str(data["account"]), object=object)
                    row = state.media_upsert(
                        account=str(data["account"]),
                        id=str(data.get("id") or ""),
                        object=object,
                        product_type=data.get("media_product_type"),
                        ad_id=data.get("ad_id"),
                        created=float(data["created_time"]) if data.get("created_time") else None,
                        caption=str(data.get("caption") or data.get("message") or ""),
                    )
                    return self._json(200, {"id": row["id"]})
                if (method, name) == ("POST", "comments"):
                    return self._json(200, state.comment_create(data))
                if (method, name) == ("POST", "messages"):
                    return self._json(200, state.message_create(data))
                if (method, name) == ("POST", "subscriptions"):
                    state.subscription_set(
                        account=str(data["account"]),
                        app_id=str(data["app_id"]),
                        fields=list(data.get("fields", [])),
                    )
                    return self._json(200, {"data": state.subscribed_apps(str(data["account"]))})
                if (method, name) == ("POST", "token"):
                    state.token_expires_at = int(data.get("expires_at", 0))
                    state.token_valid = bool(data.get("is_valid", True))
                    return self._json(
                        200, {"expires_at": state.token_expires_at, "is_valid": state.token_valid}
                    )
                if (method, name) == ("POST", "tokens"):
                    return self._json(200, state.token_register(data))
                if (method, name) == ("POST", "login"):
                    return self._json(200, state.login_set(data))
                if (method, name) == ("POST", "clock"):
                    return self._json(200, state.clock_advance(float(data["advance_seconds"])))
                if (method, name) == ("POST", "faults"):
                    return self._json(200, state.fault_add(data))
                if (method, name) == ("DELETE", "faults"):
                    return self._json(200, state.fault_add({"mode": "clear"}))
                if (method, name) == ("GET", "faults"):
                    with state.lock:
                        return self._json(
                            200,
                            {"pending": sum(f.count for f in state.faults), "fired": list(state.fault_log)},
                        )
                if (method, name) == ("GET", "calls"):
                    with state.lock:
                        return self._json(
                            200,
                            {
                                "calls": sum(state.calls.values()),
                                "by_path": dict(state.calls),
                                "log": list(state.call_log),
                            },
                        )
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
            whatsapp = whatsapp_send_body(state, parsed, raw) if method == "POST" else None
            target = (
                whatsapp_target(whatsapp)
                if whatsapp is not None
                else _write_target(parsed, raw, query)
                if method == "POST"
                else ""
            )
            fault = state.fault_next(method, split.path, target)
            if fault and fault.latency:
                time.sleep(fault.latency)
            if fault and fault.mode in ("timeout", "drop"):
                if fault.mode == "timeout":
                    state.stopping.wait(fault.hang)
                self.close_connection = True
                return
            if fault and fault.mode == "error":
                return self._error(fault.error(whatsapp=whatsapp is not None), split.path, fault)
            try:
                if self._login(method, split.path, query, raw):
                    return
                token = (
                    query.get("access_token", [""])[0]
                    or self.headers.get("Authorization", "").removeprefix("Bearer ").strip()
                )
                if parsed is None:
                    raise GraphError(100, message="(#100) Unknown path components")
                if not token:
                    # As Meta answers a call without a token (recorded: meta_page answer_error__code104).
                    raise GraphError(104)
                host, segments = parsed
                node, edge = segments[0], (segments[1] if len(segments) > 1 else None)
                if node == "refresh_access_token" and host == "instagram" and method == "GET":
                    return self._json(200, state.token_refresh(token, query))
                if node != "debug_token":  # debug_token inspects a token; it is not refused for one
                    state.token_check(token)
                if host == "instagram" and segments == ["access_token"] and method == "GET":
                    return self._json(200, state.instagram_long_lived(token, query))
                if node == "me" and method == "GET" and edge in (None, "accounts"):
                    return self._json(
                        200,
                        state.me(host, token) if edge is None else state.me_accounts(token, self._base_url()),
                    )
                if method == "GET":
                    answer = router.get(host, node, edge, query, self._base_url(), split.path)
                elif method == "DELETE":
                    answer = router.delete(host, node, edge)
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
                return self._error(fault.error(whatsapp=whatsapp is not None), split.path, fault)
            if fault and fault.mode == "apply_then_timeout":
                state.stopping.wait(fault.hang)
                self.close_connection = True
                return
            if fault and fault.mode == "apply_then_drop":
                self.close_connection = True
                return
            if fault and fault.mode == "usage":
                return self._json(
                    200, answer, {"X-Business-Use-Case-Usage": _business_usage(state, split.path, fault)}
                )
            self._json(200, answer)

        def _html(self, status: int, body: str) -> None:
            payload = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _login(self, method: str, path: str, query: dict, raw: bytes) -> bool:
            """The login flows' pages and exchanges (simulators/meta/login.py); False for any
            other path. Consent is a page a browser shows; Allow answers Meta's redirect."""
            segments = [p for p in path.strip("/").split("/") if p]
            kind = (
                "instagram"
                if segments == ["oauth", "authorize"]
                else "facebook"
                if len(segments) == 3 and VERSION.match(segments[0]) and segments[1:] == ["dialog", "oauth"]
                else ""
            )
            form = {k: v[0] for k, v in parse_qs(raw.decode(errors="replace")).items()} if raw else {}
            if kind and method == "GET":
                self._html(*state.consent_page(kind, query))
                return True
            if kind and method == "POST":
                try:
                    where = state.consent_allow(kind, form)
                except ValueError as exc:
                    self._html(400, f"<!doctype html><title>Error</title><p>{exc}</p>")
                    return True
                self.send_response(302)
                self.send_header("Location", where)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return True
            if segments == ["instagram", "oauth", "access_token"] and method == "POST":
                try:
                    self._json(200, state.instagram_code_exchange(form))
                except LoginRefusal as exc:
                    self._json(exc.status, exc.answer)
                return True
            if (
                len(segments) == 3
                and VERSION.match(segments[0])
                and segments[1:] == ["oauth", "access_token"]
            ):
                self._json(200, state.facebook_access_token(query))
                return True
            return False

        def _error(self, error: GraphError, path: str, fault: Fault | None) -> None:
            headers = (
                {"WWW-Authenticate": 'OAuth "Facebook Platform" "invalid_token"'} if error.code == 190 else {}
            )
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
            self._dispatch("DELETE")

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
        request = urllib.request.Request(
            f"{self.root}{path}", data=data, method=method, headers={"Content-Type": "application/json"}
        )
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


def serve(
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    state_path: str | None = None,
    callback: str | None = None,
    app_id: str | None = None,
    app_secret: str | None = None,
    batch: bool = False,
    hang_seconds: float = 15.0,
    version: str = "v26.0",
) -> GraphSimulator:
    """Start the simulator on host:port (loopback only; port 0: any free port) in a background thread."""
    if not is_loopback_host(host):
        raise ValueError(f"the Graph simulator binds loopback only, not {host!r}")
    state = SimulatorState(
        state_path=state_path,
        callback=callback,
        app_id=app_id,
        app_secret=app_secret,
        batch=batch,
        hang_seconds=hang_seconds,
    )
    server = ThreadingHTTPServer((host, port), make_handler(state))
    server.daemon_threads = True
    simulator = GraphSimulator(server, state, version)
    simulator._thread.start()
    return simulator
