"""Each recorded Graph answer (fixtures/meta_*/recorded/answer_*.json, fixtures/meta_recorded_PROVENANCE.md)
read by the code that reads that call's answer: the reader's list pages and DMs, the transports'
receipts, the error table. One test per recorded answer; the simulator is held to the same files
by tests/providers/meta/integration/test_simulator_shapes.py."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from conduit.providers.base import SourceConfig
from conduit.providers.login import LoginApp, LoginRefused
from conduit.providers.meta import errors
from conduit.providers.meta.adapters import MetaInstagramAdapter, MetaPageAdapter
from conduit.providers.meta.graph import graph_error
from conduit.providers.meta.login import FacebookPageLogin, InstagramLogin
from conduit.providers.meta.reader import _edge, _position
from conduit.providers.meta.transport import MetaCommentReplyTransport, MetaPrivateReplyTransport

ROOT = Path(__file__).resolve().parents[4] / "fixtures"
# WhatsApp's recorded material is held by tests/providers/whatsapp/ and tests/simulators/.
INSTAGRAM_AND_PAGE = ("meta_instagram", "meta_page")


def recorded(name: str) -> dict:
    platform, _, rest = name.partition("/")
    return json.loads((ROOT / f"meta_{platform}" / "recorded" / f"{rest}.json").read_text())


def every(prefix: str) -> list[str]:
    return sorted(
        f"{p.parent.parent.name.removeprefix('meta_')}/{p.stem}"
        for d in INSTAGRAM_AND_PAGE
        for p in ROOT.glob(f"{d}/recorded/{prefix}*.json")
    )


# List pages: what the reader continues from. "time" = Meta's time-based paging (until and
# __paging_token, no cursors), "cursor" = after, None = the last page.
LISTS = {
    "page/answer_feed__time_paged": "time",
    "page/answer_posts__time_paged": "time",
    "page/answer_feed__cursor_paged": "cursor",
    "page/answer_post_comments__cursor_page": "cursor",
    "instagram/answer_media__list_page": "cursor",
    "instagram/answer_comments__page": "cursor",
    "instagram/answer_comments__documented": None,
    "instagram/answer_replies__list": None,
    "instagram/answer_conversations__list": None,
    "instagram/answer_conversations__list_documented": "cursor",
    "instagram/answer_conversations__user_id_documented": None,
}


def test_every_recorded_list_answer_is_named_here():
    assert set(LISTS) | set(DETAILS) | set(RECEIPTS) | set(ERRORS) | set(TOKENS) | set(SUBSCRIBES) | set(
        LOGIN_ANSWERS
    ) | {
        "instagram/answer_comment__with_replies",
        "instagram/answer_conversation__messages",
        "instagram/answer_conversation__messages_documented",
    } == set(every("answer_"))


@pytest.mark.parametrize("name", sorted(LISTS))
def test_a_recorded_list_page_is_followed_as_meta_gave_it(name):
    """A time-paged /feed page (previous/next with since/until, no cursors) is not malformed_page:
    `paging.next` is followed as given, `cursors` never required."""
    document = recorded(name)
    data, position = _edge(document, name)
    assert isinstance(data, list) and data
    kind = LISTS[name]
    if kind is None:
        assert position is None
    elif kind == "time":
        assert "cursors" not in document["paging"]
        assert set(position) == {"until", "__paging_token"} and position["until"].isdigit()
    else:
        assert "after" in position and position["after"] == document["paging"]["cursors"]["after"]
    assert position is None or (_position(position) and "access_token" not in position)


def config(account: str, system: str) -> SourceConfig:
    return SourceConfig(
        name="recorded",
        source_system=system,
        account_ref=account,
        event_types=frozenset({"comment.created", "message.created"}),
        contract_version="meta-v1",
        canary=False,
        access_token="t",
    )


# A message's details, as the reader gets them inline from a conversation: (adapter, the account).
DETAILS = {
    "instagram/answer_message__details": (MetaInstagramAdapter, "6521100000000901"),
    "instagram/answer_message__details_documented": (MetaInstagramAdapter, None),
    "page/answer_message__details_messenger": (MetaPageAdapter, "2121000000000901"),
}


@pytest.mark.parametrize("name", sorted(DETAILS))
def test_a_recorded_message_is_read_back_as_the_webhooks_message_created(name):
    """DMs are read back through the Conversations API. The recorded message, to the
    account, becomes the message.created event its webhook would (mid, sender, the account as recipient)."""
    message = recorded(name)
    cls, account = DETAILS[name]
    account = account or message["to"]["data"][0]["id"]
    reader = cls()
    items = reader._conversation_items({"messages": {"data": [message]}}, account)
    parsed = reader.normalize(items, account, config(account, reader.source_system))
    (observation,) = parsed.observations
    assert observation.event_type == "message.created"
    assert observation.source_event_id == message["id"] and observation.sender_ref == message["from"]["id"]
    assert not parsed.rejections and not parsed.own
    # Seen from the person's side, the same message is the account's own: evidence, never an event.
    mine = reader.normalize(
        reader._conversation_items({"messages": {"data": [message]}}, message["from"]["id"]),
        message["from"]["id"],
        config(message["from"]["id"], reader.source_system),
    )
    assert not mine.observations and [o.provider_id for o in mine.own] == [message["id"]]
    assert mine.own[0].parent_ref == account


@pytest.mark.parametrize(
    "name", ["instagram/answer_conversation__messages", "instagram/answer_conversation__messages_documented"]
)
def test_a_recorded_conversation_without_details_reads_nothing_and_refuses_nothing(name):
    """Messages listed without details (older than the 20 newest, or not asked for) are not read back:
    the declared limitation, never an invalid source item."""
    reader = MetaInstagramAdapter()
    assert reader._conversation_items(recorded(name), "17841000000000902") == []


def test_a_recorded_comment_with_its_replies_is_read_like_its_webhook():
    """The recording is the account's own comment, named by `user` (no `from`), with a reply recorded
    without its author: the comment is the account's own item (evidence), the reply, which names no
    author, is refused as the webhook's map refuses it (missing identity), never guessed."""
    comment = recorded("instagram/answer_comment__with_replies")
    reader = MetaInstagramAdapter()
    from conduit.providers.meta.reader import _Scan

    account = comment["user"]["id"]
    items = reader.comment_items(comment, [comment["media"]["id"], None], _Scan(s="x"))
    parsed = reader.normalize(items, account, config(account, "meta-instagram"))
    assert [o.provider_id for o in parsed.own] == [comment["id"]]
    assert [r.reason_code for r in parsed.rejections] == ["missing_identity"] and not parsed.observations
    # Another account reads it: the buyer's comment, an event under its own id.
    other = reader.normalize(
        reader.comment_items(comment, [comment["media"]["id"], None], _Scan(s="x")),
        "17841000000000999",
        config("17841000000000999", "meta-instagram"),
    )
    assert [o.source_event_id for o in other.observations] == [comment["id"]]


# Send answers: the id a transport keeps as the receipt.
RECEIPTS = {
    "instagram/answer_private_reply__sent": (MetaPrivateReplyTransport, "message_id"),
    "instagram/answer_public_reply__created": (MetaCommentReplyTransport, "id"),
}


@pytest.mark.parametrize("name", sorted(RECEIPTS))
def test_a_recorded_send_answer_is_a_receipt_with_its_id(name):
    """Instagram's private reply answer carries a message id of about 160 characters, which the
    transport reads as a receipt, not as unreadable_receipt."""
    cls, key = RECEIPTS[name]
    answer = recorded(name)
    transport = cls(
        "http://127.0.0.1:9/instagram/v25.0", token="t", account_ref="17841000000000999", object="instagram"
    )
    assert transport._receipt_id(answer) == answer[key]


# Token answers: what keeping a stored token alive reads from each.
TOKENS = {
    "instagram/answer_refresh_access_token__refreshed",
    "instagram/answer_refresh_access_token__with_permissions",
}
SUBSCRIBES = {"page/answer_subscribed_apps__subscribe_documented"}


@pytest.mark.parametrize("name", sorted(SUBSCRIBES))
def test_a_recorded_subscribe_answer_is_success(name, monkeypatch):
    from conduit.providers.meta import subscriptions
    from conduit.providers.meta.graph import GraphResponse

    answer = recorded(name)
    monkeypatch.setattr(subscriptions, "graph_request", lambda **call: GraphResponse(answer, 20, None))
    asked = dict(
        object_="page",
        account="100000000000001",
        event_types=frozenset({"comment.created"}),
        base_url="https://graph.facebook.com/v26.0",
        access_token="EAA_test",
        timeout=5,
    )
    assert subscriptions.subscribe(**asked) == ""
    # Control: an answer without success is not taken for one.
    monkeypatch.setattr(
        subscriptions, "graph_request", lambda **call: GraphResponse({"success": False}, 20, None)
    )
    assert subscriptions.subscribe(**asked) == "Meta did not answer success to the subscription"


@pytest.mark.parametrize("name", sorted(TOKENS))
def test_a_recorded_refresh_answer_is_a_new_token_and_its_lifetime(name, monkeypatch):
    from datetime import datetime, timedelta, timezone

    from conduit.providers.meta import tokens
    from conduit.providers.meta.graph import GraphResponse

    answer = recorded(name)
    asked = {}

    def graph_get(**call):
        asked.update(call)
        return GraphResponse(answer, len(json.dumps(answer)), None)

    monkeypatch.setattr(tokens, "graph_get", graph_get)
    now = datetime(2026, 1, 10, tzinfo=timezone.utc)
    renewal = tokens.token_renew(
        base_url="https://graph.instagram.com/v26.0",
        access_token="IGQ_test_old",
        issued_at=now - timedelta(days=2),
        now=now,
        timeout=5,
    )
    assert (renewal.outcome, renewal.access_token) == ("refreshed", answer["access_token"])
    assert renewal.expires_at == now + timedelta(seconds=answer["expires_in"])
    # Asked as Meta documents it: the host's root, no version, grant_type ig_refresh_token.
    assert (asked["base_url"], asked["path"], asked["params"]) == (
        "https://graph.instagram.com",
        "refresh_access_token",
        {"grant_type": "ig_refresh_token"},
    )


# Error envelopes: what the table makes of each (outcome, reason).
ERRORS = {
    "instagram/answer_error__code3_capability": (errors.NOT_APPLIED_FINAL, "capability_missing"),
    "instagram/answer_error__code10_window": (errors.NOT_APPLIED_FINAL, "window_expired"),
    "instagram/answer_error__code2500_ig_host": (errors.AMBIGUOUS, "graph_unknown_code"),
    "page/answer_error__code100_object": (errors.AMBIGUOUS, "graph_unknown_code"),
    "page/answer_error__code104_missing_token": (errors.NOT_APPLIED_FINAL, "token_invalid"),
    "page/answer_error__code190_documented": (errors.NOT_APPLIED_FINAL, "token_invalid"),
    "page/answer_error__code190_expired": (errors.NOT_APPLIED_FINAL, "token_invalid"),
    "page/answer_error__code200_permission": (errors.NOT_APPLIED_FINAL, "permission_missing"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_a_recorded_error_envelope_means_what_the_table_says(name):
    """3 and 200-299 mean the call was refused (nothing applied); the window's text
    is localized (this recording is Portuguese), so the code decides; unknown codes stay ambiguous."""
    payload = json.dumps(recorded(name)).encode()
    error = graph_error(400, payload, {}, had_cursor=False)
    meant = errors.meaning(error.status, error.code, error.subcode, error.message_hint)
    assert (meant.outcome, meant.reason) == ERRORS[name]
    assert not error.message.count("(#")  # Meta's text is never kept


# -- connecting accounts: the login flows read the recorded answers -----------------------------

LOGIN_ANSWERS = {
    "instagram/answer_oauth_access_token__documented",
    "instagram/answer_oauth_access_token__flat",
    "instagram/answer_oauth_access_token__code_used",
    "instagram/answer_access_token__long_lived_documented",
    "page/answer_oauth_access_token__code_used",
    "page/answer_oauth_access_token__fb_exchange",
    "page/answer_me_accounts__pages",
    "page/answer_debug_token__user",
}


class Answering:
    """A loopback server answering each (method, path) with (status, JSON) as `answers` says,
    standing in for every Meta host of a login flow (LoginApp.simulator_url)."""

    def __init__(self, answers: dict) -> None:
        self.asked: list[tuple[str, str, dict]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, method: str) -> None:
                split = urlsplit(self.path)
                size = int(self.headers.get("Content-Length") or 0)
                form = dict(parse_qsl(self.rfile.read(size).decode())) if size else {}
                query = {**dict(parse_qsl(split.query)), **form}
                outer.asked.append((method, split.path, query))
                status, body = answers[(method, split.path)](query)
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self):
                self._answer("GET")

            def do_POST(self):
                self._answer("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "Answering":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def login_app(url: str) -> LoginApp:
    return LoginApp(
        client_id="1", client_secret="s", redirect_uri="https://conduit.example.invalid/cb", simulator_url=url
    )


NOW = datetime(2026, 1, 10, tzinfo=timezone.utc)
# /me has no recording: the account as the adapter asks it (fields=user_id,username).
IG_ME = {"user_id": "17841400000000001", "username": "user_test_01"}


@pytest.mark.parametrize(
    "name, scopes",
    [
        (
            "instagram/answer_oauth_access_token__documented",
            (
                "instagram_business_basic",
                "instagram_business_content_publish",
                "instagram_business_manage_comments",
                "instagram_business_manage_messages",
            ),
        ),
        ("instagram/answer_oauth_access_token__flat", ("instagram_business_basic",)),
    ],
)
def test_a_recorded_instagram_code_answer_becomes_the_60_day_token_and_its_scopes(name, scopes):
    """Documented wrapped in `data` with a permission string, live flat with a list: both read."""
    long_lived = recorded("instagram/answer_access_token__long_lived_documented")
    with Answering(
        {
            ("POST", "/instagram/oauth/access_token"): lambda q: (200, recorded(name)),
            ("GET", "/instagram/access_token"): lambda q: (200, long_lived),
            ("GET", "/instagram/v26.0/me"): lambda q: (200, IG_ME),
        }
    ) as meta:
        (asset,) = InstagramLogin().grant(login_app(meta.url), "AQ_test_code", now=NOW, timeout=5)
    assert (asset.account_ref, asset.name) == ("17841400000000001", "user_test_01")
    assert asset.access_token == long_lived["access_token"]  # the 60-day token, not the short one
    assert asset.expires_at == NOW + timedelta(seconds=long_lived["expires_in"])
    assert asset.scopes == scopes
    exchanged = meta.asked[1][2]
    assert exchanged["grant_type"] == "ig_exchange_token"
    short = recorded(name)
    assert exchanged["access_token"] == (short.get("data") or [short])[0]["access_token"]


def test_recorded_facebook_answers_become_the_pages_with_their_tokens():
    pages, inspected = recorded("page/answer_me_accounts__pages"), recorded("page/answer_debug_token__user")
    exchanged = recorded("page/answer_oauth_access_token__fb_exchange")
    # The code's answer has the fb_exchange_token answer's documented shape (not recorded apart).
    user = {"access_token": "EAA_test_user", "token_type": "bearer", "expires_in": 7200}
    with Answering(
        {
            ("GET", "/v26.0/oauth/access_token"): lambda q: (
                200,
                exchanged if q.get("grant_type") == "fb_exchange_token" else user,
            ),
            ("GET", "/v26.0/debug_token"): lambda q: (200, inspected),
            ("GET", "/v26.0/me/accounts"): lambda q: (200, pages),
        }
    ) as meta:
        (asset,) = FacebookPageLogin().grant(login_app(meta.url), "AQ_test_code", now=NOW, timeout=5)
    page = pages["data"][0]
    assert (asset.account_ref, asset.name, asset.access_token) == (
        page["id"],
        page["name"],
        page["access_token"],
    )
    assert asset.expires_at is None  # a Page token from a long-lived user token: no clock expiry
    assert asset.scopes == tuple(sorted(inspected["data"]["scopes"]))
    # debug_token inspected the long-lived token, /me/accounts was asked with it.
    asked = {path: query for _, path, query in meta.asked}
    assert asked["/v26.0/debug_token"]["input_token"] == exchanged["access_token"]
    assert asked["/v26.0/me/accounts"]["access_token"] == exchanged["access_token"]


@pytest.mark.parametrize(
    "name, refusal",
    [
        (
            "instagram/answer_oauth_access_token__code_used",
            "Meta refused the code exchange (HTTP 400, code 400)",
        ),
        ("page/answer_oauth_access_token__code_used", "Meta refused the code exchange (code 100/36009)"),
    ],
)
def test_a_recorded_used_code_is_refused_in_conduits_words_with_metas_code(name, refusal):
    answer = recorded(name)
    login = InstagramLogin() if name.startswith("instagram/") else FacebookPageLogin()
    with Answering(
        {
            ("POST", "/instagram/oauth/access_token"): lambda q: (400, answer),
            ("GET", "/v26.0/oauth/access_token"): lambda q: (400, answer),
        }
    ) as meta:
        with pytest.raises(LoginRefused) as refused:
            login.grant(login_app(meta.url), "AQ_test_code", now=NOW, timeout=5)
    assert str(refused.value) == refusal
    assert "has been used" not in str(refused.value)  # Meta's text is never kept


def test_every_recorded_file_says_where_it_came_from():
    provenance = (ROOT / "meta_recorded_PROVENANCE.md").read_text()
    unnamed = sorted(
        f"{p.parent.parent.name}/recorded/{p.name}"
        for d in INSTAGRAM_AND_PAGE
        for p in ROOT.glob(f"{d}/recorded/*.json")
        if f"`{p.name}`" not in provenance and f"`{p.parent.parent.name}/recorded/{p.name}`" not in provenance
    )
    assert unnamed == []
