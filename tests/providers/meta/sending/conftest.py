"""Meta out: a Graph simulator, Meta sources routed to it, and comments delivered as Meta notifies them."""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler

import pytest

from conduit.providers.meta.webhook import signature_header
from simulators.meta import serve
from tests.conftest import loopback_server
from tests.providers.meta.integration.conftest import (  # noqa: F401  (fixtures, re-exported for this directory)
    APP_ID,
    APP_SECRET,
    IG_ACCOUNT,
    PAGE_ACCOUNT,
    _meta_env,
    post_meta,
    register_meta,
)

COPY = "Thanks! The details are on their way."
PERSON = "17841400000000901"


class Capture:
    """A loopback callback that keeps what the simulator notifies (echoes, the account's comments)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                capture.bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = loopback_server(Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/callback"

    def wait(self, count: int, timeout: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while len(self.bodies) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return [json.loads(b) for b in self.bodies]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def capture():
    c = Capture()
    yield c
    c.close()


@pytest.fixture
def graph(capture):
    """The Graph simulator, notifying the capture callback (signed with the test app's secret)."""
    simulator = serve(callback=capture.url, app_id=APP_ID, app_secret=APP_SECRET, hang_seconds=1)
    yield simulator
    simulator.close()


def sim(graph, path: str, body: dict | None = None, method: str = "POST") -> dict:
    return graph.control(path, body, method=method)


def applied(graph) -> dict:
    return sim(graph, "/_sim/applied", method="GET")


def ig_comment_body(
    comment_id: str, media_id: str, *, text: str = "What is the price?", entry_time: int | None = None
) -> bytes:
    """An Instagram comment notification (no creation time: Meta sends none)."""
    return json.dumps(
        {
            "object": "instagram",
            "entry": [
                {
                    "id": IG_ACCOUNT,
                    "time": entry_time or int(time.time()),
                    "changes": [
                        {
                            "field": "comments",
                            "value": {
                                "id": comment_id,
                                "text": text,
                                "from": {"id": PERSON, "username": "person_test"},
                                "media": {"id": media_id, "media_product_type": "FEED"},
                            },
                        }
                    ],
                }
            ],
        }
    ).encode()


def page_comment_body(
    comment_id: str, post_id: str, *, created: int, text: str = "What is the price?"
) -> bytes:
    return json.dumps(
        {
            "object": "page",
            "entry": [
                {
                    "id": PAGE_ACCOUNT,
                    "time": int(time.time()),
                    "changes": [
                        {
                            "field": "feed",
                            "value": {
                                "item": "comment",
                                "verb": "add",
                                "comment_id": comment_id,
                                "post_id": post_id,
                                "parent_id": post_id,
                                "from": {"id": PERSON, "name": "Person Test"},
                                "message": text,
                                "created_time": created,
                            },
                        }
                    ],
                }
            ],
        }
    ).encode()


def signed(body: bytes) -> dict:
    return {"X-Hub-Signature-256": signature_header(body=body, secret=APP_SECRET)}


@pytest.fixture
def deliver(post_meta, django_capture_on_commit_callbacks):  # noqa: F811 (the imported fixture)
    """POST a Meta body to the callback and run its on-commit work (the signals replies listens to)."""

    def _deliver(body: bytes) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            assert post_meta(body).status_code == 200

    return _deliver


def meta_source(graph, *, kind: str, purposes: dict[str, str], name: str | None = None):
    """A connected Meta source at the simulator with routes and copy for each purpose ->
    transport: ("instagram" | "page")."""
    from replies.services import reply_copy_create, reply_route_declare

    if kind == "instagram":
        sim(graph, "/_sim/accounts", {"id": IG_ACCOUNT, "object": "instagram"})
        source = register_meta(
            name or "ig-test",
            "meta-instagram",
            IG_ACCOUNT,
            graph_url=graph.instagram_url,
            purposes=list(purposes),
        )
        url = graph.instagram_url
    else:
        sim(graph, "/_sim/accounts", {"id": PAGE_ACCOUNT, "object": "page"})
        source = register_meta(
            name or "page-test", "meta-page", PAGE_ACCOUNT, graph_url=graph.url, purposes=list(purposes)
        )
        url = graph.url
    for purpose, transport in purposes.items():
        reply_route_declare(source_id=source.pk, purpose=purpose, transport_name=transport, target_url=url)
        reply_copy_create(source_id=source.pk, purpose=purpose, channel=purpose, text=COPY, actor="test")
    return source


def approved_comment(graph, deliver, source, comment: str, media: str):
    """A buyer's Instagram comment on `media`, delivered as Meta notifies it, its planned public
    reply approved by a reviewer: the ReplyAction, ready to send."""
    from replies.models import ReplyAction
    from replies.services import reply_approve

    sim(
        graph,
        "/_sim/comments",
        {
            "account": source.account_ref,
            "media_id": media,
            "id": comment,
            "text": "price?",
            "from_id": PERSON,
        },
    )
    deliver(ig_comment_body(comment, media))
    action = ReplyAction.objects.get(event__message_ref=comment)
    assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
    return action
