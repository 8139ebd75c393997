"""The Graph simulator answers in the shapes recorded from Meta (fixtures/meta_*/recorded/).

For each recorded Graph answer the same call is made of a running simulator, and both answers are
reduced to a shape: the same keys at every level, the same JSON types, lists compared by their
items' shapes, and every string put in a class (an id's pattern and length band, Meta's time form,
a paging URL's parameters). The shapes must be equal; a recorded notification body is held to the
simulator's notification the same way. Where a recording is known to be cut or placeholder-filled
(fixtures/meta_recorded_PROVENANCE.md), the scenario names what is left out of the comparison.
"""

from __future__ import annotations

import copy
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable
from urllib.error import HTTPError
from urllib.parse import parse_qsl, urlencode, urlsplit
from urllib.request import Request, build_opener

import pytest

from simulators.meta import serve
from tests.providers.meta.connect.conftest import NoRedirect
from tests.simulators.meta.helpers import APP_ID, APP_SECRET, Receiver, call, wait_for

FIXTURES = Path(__file__).resolve().parents[4] / "fixtures"
# WhatsApp's recorded material is held by tests/providers/whatsapp/ and tests/simulators/.
INSTAGRAM_AND_PAGE = ("meta_instagram", "meta_page")
IG = "17841400000000001"  # 17 digits, as recorded Instagram account ids
PAGE = "100000000000001"  # 15 digits, as recorded Page ids
PERSON = "1234567890123456"  # 16 digits, as recorded IGSIDs/PSIDs
DAY = 24 * 3600

# -- shapes -----------------------------------------------------------------------------------

PAGING_PARAMS = {"after", "before", "since", "until", "__paging_token", "__previous"}


def _band(digits: str) -> str:
    n = len(digits)
    return (
        "17-18"
        if 17 <= n <= 18
        else "15-16"
        if 15 <= n <= 16
        else "11-14"
        if 11 <= n <= 14
        else "<=10"
        if n <= 10
        else ">18"
    )


def _part(digits: str) -> str:
    """An `<a>_<b>` id's part: Graph's era changes a post's digits within 15-18, so one band."""
    return "15-18" if 15 <= len(digits) <= 18 else _band(digits)


def _length(n: int, around: int) -> str:
    return f"~{around}" if abs(n - around) <= 12 else f"len{n}"


def string_class(value: str) -> str:
    """A string's shape: which kind of id, time or paging link it is, or plain text."""
    if re.fullmatch(r"\d+", value):
        if len(value) == 10 and value.startswith("1"):
            return "unix-seconds-string"
        return f"digits:{_band(value)}"
    if m := re.fullmatch(r"(\d+)_(\d+)", value):
        return f"pair:{_part(m.group(1))}_{_part(m.group(2))}"
    if re.fullmatch(r"aWdf[A-Za-z0-9_-]+", value):
        # Instagram message ids (~164) and thread ids (~110): Meta's Z-escaped base64.
        return "ig-base64:" + (_length(len(value), 164) if len(value) > 137 else _length(len(value), 110))
    if re.fullmatch(r"m_[A-Za-z0-9_-]+", value):
        return "messenger-mid:" + _length(len(value), 88)
    if re.fullmatch(r"mid\.\d+:[0-9a-f]+", value):
        return "messenger-mid:2016"
    if re.fullmatch(r"t_\d+", value):
        return "messenger-thread"
    if re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+0000", value):
        return "iso+0000"
    if value.startswith(("http://", "https://")):
        query = urlsplit(value).query
        paging = sorted(k for k, v in parse_qsl(query, keep_blank_values=True) if k in PAGING_PARAMS and v)
        return f"url:paging({','.join(paging)})" if paging else "url"
    return "str"


def shape_of(value, *, placeholder: bool = False):
    """A JSON value's shape: dicts by key, lists by their distinct item shapes, scalars by type and
    (strings) class. `placeholder`: a documentation example whose strings are all stand-ins."""
    if isinstance(value, dict):
        return {k: shape_of(v, placeholder=placeholder) for k, v in value.items()}
    if isinstance(value, list):
        items = {json.dumps(shape_of(v, placeholder=placeholder), sort_keys=True) for v in value}
        return ["list", sorted(items)]
    if isinstance(value, bool):
        return "bool"
    if value is None:
        return "null"
    if isinstance(value, int):
        return "int:unix-ms" if value >= 10**12 else "int:unix-s" if value >= 10**9 else "int"
    if isinstance(value, float):
        return "float"
    return "str" if placeholder else string_class(value)


def prune(shape, *, drop: frozenset = frozenset(), keep: dict | None = None, path: str = "$"):
    """Leave out the `drop` paths ("$.paging.cursors.before", "$.data[].id") and, at each path of
    `keep`, every key but the named ones."""
    if isinstance(shape, dict):
        allowed = (keep or {}).get(path)
        return {
            k: prune(v, drop=drop, keep=keep, path=f"{path}.{k}")
            for k, v in shape.items()
            if f"{path}.{k}" not in drop and (allowed is None or k in allowed)
        }
    if isinstance(shape, list) and shape and shape[0] == "list":
        items = {
            json.dumps(prune(json.loads(i), drop=drop, keep=keep, path=f"{path}[]"), sort_keys=True)
            for i in shape[1]
        }
        return ["list", sorted(items)]
    return shape


def differences(recorded, simulated, path: str = "$") -> list[str]:
    """Where two shapes differ, one line each (empty: the same shape)."""
    if isinstance(recorded, dict) and isinstance(simulated, dict):
        found = [f"{path}.{k}: recorded, missing from the simulator" for k in recorded if k not in simulated]
        found += [f"{path}.{k}: the simulator's, not recorded" for k in simulated if k not in recorded]
        for key in recorded.keys() & simulated.keys():
            found += differences(recorded[key], simulated[key], f"{path}.{key}")
        return found
    if (
        isinstance(recorded, list)
        and isinstance(simulated, list)
        and recorded[:1] == simulated[:1] == ["list"]
    ):
        known, seen = recorded[1], simulated[1]
        if known and not seen:
            return [f"{path}: recorded items, the simulator's list is empty"]
        found = []
        for item in seen:
            if item not in known:
                if len(known) == 1:
                    found += differences(json.loads(known[0]), json.loads(item), f"{path}[]")
                else:
                    found.append(f"{path}[]: no recorded item has the simulator's shape {item}")
        return found
    return [] if recorded == simulated else [f"{path}: recorded {recorded!r}, the simulator's {simulated!r}"]


def compare(recorded: dict, simulated: dict, *, drop=frozenset(), keep=None, placeholder=False) -> list[str]:
    return differences(
        prune(shape_of(recorded, placeholder=placeholder), drop=drop, keep=keep),
        prune(shape_of(simulated, placeholder=placeholder), drop=drop, keep=keep),
    )


# -- the simulator ------------------------------------------------------------------------------


@pytest.fixture
def sim():
    simulator = serve(port=0, hang_seconds=2)
    yield simulator
    simulator.close()


@pytest.fixture
def receiver():
    receiver = Receiver()
    yield receiver
    receiver.close()


@pytest.fixture
def notifying(receiver):
    simulator = serve(port=0, callback=receiver.url, app_id=APP_ID, app_secret=APP_SECRET, hang_seconds=2)
    yield simulator
    simulator.close()


def control(sim, route: str, **body) -> dict:
    status, answer, _ = call(f"{sim.root}/_sim/{route}", method="POST", body=body)
    assert status == 200, answer
    return answer


def accounts(sim, *, linked: bool = False) -> None:
    control(sim, "accounts", id=PAGE, object="page", name="Sample Page")
    control(
        sim,
        "accounts",
        id=IG,
        object="instagram",
        username="sample.business",
        **({"page_id": PAGE} if linked else {}),
    )


def media(sim, account: str = IG, object: str = "instagram", **data) -> str:
    return control(sim, "media", account=account, object=object, **data)["id"]


def comment(sim, **data) -> str:
    return control(sim, "comments", **data)["id"]


def dm(sim, account: str = IG, **data) -> dict:
    return control(sim, "messages", account=account, **data)


def get(url: str, **params) -> dict:
    status, answer, _ = call(url, params=params)
    return answer


def recorded(name: str) -> dict:
    folder, _, stem = name.partition("/")
    return json.loads((FIXTURES / folder / "recorded" / f"{stem}.json").read_text())


# -- the recorded answers, asked again --------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """How to ask the simulator what the recording answered, and what the recording cannot tell."""

    ask: Callable
    drop: frozenset = frozenset()
    keep: dict = field(default_factory=dict)
    placeholder: bool = False


def ig_media_list(sim, rec):
    accounts(sim)
    for i in range(3):
        media(sim, created_time=1780000000 + i)
    fields = dict(parse_qsl(urlsplit(rec["paging"]["next"]).query))["fields"]
    return get(f"{sim.url}/{IG}/media", fields=fields, limit=2)


def ig_comments_page(sim, rec):
    accounts(sim)
    target = media(sim)
    for i in range(3):
        comment(
            sim, account=IG, media_id=target, text=f"c{i}", from_id=PERSON, created_time=time.time() - 60 + i
        )
    return get(f"{sim.instagram_url}/{target}/comments", limit=2)


def ig_comment_with_replies(sim, rec):
    accounts(sim)
    target = media(sim)
    own = comment(sim, account=IG, media_id=target, text="own", from_id=IG)
    comment(sim, account=IG, media_id=target, text="reply", from_id=PERSON, parent_id=own)
    return get(f"{sim.url}/{own}", fields="id,like_count,media,text,timestamp,user,username,hidden,replies")


def ig_comments_documented(sim, rec):
    accounts(sim)
    target = media(sim)
    comment(sim, account=IG, media_id=target, text="so cool", from_id=PERSON, from_name="commenter_username")
    return get(f"{sim.instagram_url}/{target}/comments", fields="from,text")


def ig_replies(sim, rec):
    accounts(sim)
    target = media(sim)
    top = comment(sim, account=IG, media_id=target, text="top", from_id=PERSON)
    comment(sim, account=IG, media_id=target, text="reply", from_id=IG, parent_id=top)
    return get(f"{sim.url}/{top}/replies")


def ig_public_reply(sim, rec):
    accounts(sim)
    target = comment(sim, account=IG, media_id=media(sim), text="price?", from_id=PERSON)
    return call(f"{sim.instagram_url}/{target}/replies", method="POST", params={"message": "Thanks"})[1]


def ig_private_reply(sim, rec):
    accounts(sim)
    target = comment(sim, account=IG, media_id="17800000000000001", text="LINK", from_id=rec["recipient_id"])
    return call(
        f"{sim.instagram_url}/{IG}/messages",
        method="POST",
        body={"recipient": {"comment_id": target}, "message": {"text": "Here is the link"}},
    )[1]


def ig_conversations(count: int, **params):
    def ask(sim, rec):
        accounts(sim)
        for i in range(count):
            dm(sim, from_id=f"{int(PERSON) + i}", text=f"hello {i}", created_time=time.time() - 100 + i)
        if params.get("user_id") == "first":
            return get(f"{sim.instagram_url}/{IG}/conversations", user_id=PERSON)
        return get(f"{sim.instagram_url}/{IG}/conversations", platform="instagram", **params)

    return ask


def ig_conversation_messages(count: int, fields: str):
    def ask(sim, rec):
        accounts(sim)
        conversation = None
        for i in range(count):
            conversation = dm(sim, from_id=PERSON, text=f"m{i}", created_time=time.time() - 100 + i)[
                "conversation_id"
            ]
        return get(f"{sim.instagram_url}/{conversation}", fields=fields)

    return ask


def ig_message_details(sim, rec):
    accounts(sim)
    dm(sim, from_id=PERSON, text="hello", created_time=time.time() - 10)
    sent = dm(sim, from_id=IG, to_id=PERSON, text="hi", created_time=time.time() - 5)
    return get(f"{sim.instagram_url}/{sent['mid']}", fields="id,created_time,from,to,message")


def ig_private_reply_on_facebook_host(sim, rec):
    accounts(sim, linked=True)
    target = comment(sim, account=IG, media_id=media(sim), text="LINK", from_id=PERSON)
    status, answer, _ = call(
        f"{sim.url}/{IG}/messages",
        method="POST",
        body={"recipient": {"comment_id": target}, "message": {"text": "Here is the link"}},
    )
    assert status == 400
    return answer


def ig_private_reply_too_late(sim, rec):
    accounts(sim)
    target = comment(
        sim, account=IG, media_id=media(sim), text="LINK", from_id=PERSON, created_time=time.time() - 8 * DAY
    )
    return call(
        f"{sim.instagram_url}/{IG}/messages",
        method="POST",
        body={"recipient": {"comment_id": target}, "message": {"text": "Here is the link"}},
    )[1]


def ig_unknown_edge(sim, rec):
    accounts(sim)
    return get(f"{sim.instagram_url}/{IG}/insights", metric="impressions", period="day")


def page_posts(edge: str, account: str, count: int, paging: str = "time", *, mint: bool = False, **params):
    """`count` posts a minute apart; `mint`: the simulator mints their ids (else `<page>_<16 digits>`
    are given, so that the paging is what is compared, even against a simulator that mints none)."""

    def ask(sim, rec):
        control(
            sim,
            "accounts",
            id=account,
            object="page",
            name="Sample Page",
            **({"feed_paging": paging} if paging != "time" else {}),
        )
        for i in range(count):
            given = {} if mint else {"id": f"{account}_{10**15 + 7000 + i}"}
            media(sim, account=account, object="page", created_time=1780000000 + i * 60, **given)
        return get(f"{sim.url}/{account}/{edge}", **params)

    return ask


def page_post_comments(sim, rec):
    accounts(sim)
    post = media(sim, account=PAGE, object="page")
    person = rec["data"][0]["from"]["id"]  # a person's id as long as the recorded one's
    for i in range(2):
        comment(
            sim,
            account=PAGE,
            post_id=post,
            text=f"c{i}",
            from_id=f"{int(person) + i}",
            created_time=time.time() - 60 + i,
        )
    return get(f"{sim.url}/{post}/comments", summary="true", limit=1)


def page_message_details(sim, rec):
    page, person = rec["to"]["data"][0]["id"], rec["from"]["id"]
    control(sim, "accounts", id=page, object="page", name="Sample Page")
    sent = dm(sim, account=page, from_id=person, from_name="Sample Person", text="hello", object="page")
    return get(f"{sim.url}/{sent['mid']}", fields="id,created_time,from,to")


def planted(code: int, **fault):
    def ask(sim, rec):
        accounts(sim)
        control(sim, "faults", mode="error", code=code, count=1, **fault)
        status, answer, _ = call(f"{sim.url}/{PAGE}/feed")
        assert status >= 400
        return answer

    return ask


def ig_token_refreshed(sim, rec):
    token = control(sim, "tokens", expires_in=30 * DAY, issued_at=time.time() - 2 * DAY)["token"]
    status, answer, _ = call(
        f"{sim.root}/instagram/refresh_access_token", params={"grant_type": "ig_refresh_token"}, token=token
    )
    assert status == 200, answer
    return answer


def page_subscribed(sim, rec):
    """The token's app subscribes: a simulator that knows its app (Meta infers it from the token)."""
    with_app = serve(port=0, app_id=APP_ID, app_secret=APP_SECRET)
    try:
        accounts(with_app)
        status, answer, _ = call(
            f"{with_app.url}/{PAGE}/subscribed_apps",
            method="POST",
            params={"subscribed_fields": "feed,messages"},
        )
    finally:
        with_app.close()
    assert status == 200, answer
    return answer


def expired_token(sim, rec):
    """Token checking on: a token past its expiry, as Meta answers it (not a planted fault)."""
    accounts(sim)
    token = control(sim, "tokens", expires_in=60)["token"]
    control(sim, "clock", advance_seconds=120)
    status, answer, _ = call(f"{sim.url}/{PAGE}/feed", token=token)
    assert status == 400
    return answer


def without_a_token(sim, rec):
    accounts(sim)
    status, answer, _ = call(f"{sim.url}/{PAGE}/feed", token=None)
    assert status == 400  # as recorded
    return answer


# -- connecting accounts: the login flows' answers ----------------------------------------------

REDIRECT = "https://conduit.example.invalid/connect/meta/callback"


def form_post(url: str, form: dict) -> tuple[int, dict | str, dict]:
    """A form-encoded POST, redirects not followed: (status, JSON answer or body, headers)."""
    try:
        with build_opener(NoRedirect).open(
            Request(url, data=urlencode(form).encode()), timeout=10
        ) as response:
            status, raw, headers = response.status, response.read(), dict(response.headers)
    except HTTPError as exc:
        status, raw, headers = exc.code, exc.read(), dict(exc.headers)
    try:
        return status, json.loads(raw or b"{}"), headers
    except ValueError:
        return status, raw.decode(), headers


def allowed_code(sim, kind: str) -> str:
    """The consent page's Allow pressed: the code Meta's redirect hands to the callback."""
    dialog = f"{sim.root}/oauth/authorize" if kind == "instagram" else f"{sim.url}/dialog/oauth"
    status, _, headers = form_post(dialog, {"client_id": "1", "redirect_uri": REDIRECT, "state": "s"})
    assert status == 302, status
    return dict(parse_qsl(urlsplit(headers["Location"]).query))["code"]


def instagram_exchange(sim, code: str) -> tuple[int, dict]:
    status, answer, _ = form_post(
        f"{sim.root}/instagram/oauth/access_token",
        {
            "client_id": "1",
            "client_secret": "s",
            "grant_type": "authorization_code",
            "redirect_uri": REDIRECT,
            "code": code,
        },
    )
    return status, answer


def ig_code_exchange(code_answer: str):
    def ask(sim, rec):
        accounts(sim)
        control(sim, "login", object="instagram", account=IG, code_answer=code_answer)
        status, answer = instagram_exchange(sim, allowed_code(sim, "instagram"))
        assert status == 200, answer
        return answer

    return ask


def ig_code_used(sim, rec):
    accounts(sim)
    code = allowed_code(sim, "instagram")
    assert instagram_exchange(sim, code)[0] == 200
    status, answer = instagram_exchange(sim, code)
    assert status == 400  # as recorded
    return answer


def ig_short_lived(sim) -> str:
    accounts(sim)
    return instagram_exchange(sim, allowed_code(sim, "instagram"))[1]["data"][0]["access_token"]


def ig_long_lived(sim, rec):
    short = ig_short_lived(sim)
    status, answer, _ = call(
        f"{sim.root}/instagram/access_token",
        params={"grant_type": "ig_exchange_token", "client_secret": "s"},
        token=short,
    )
    assert status == 200, answer
    return answer


def ig_refreshed_after_login(sim, rec):
    """A token the login issued, refreshed: its permissions named."""
    long_lived = ig_long_lived(sim, rec)["access_token"]
    status, answer, _ = call(
        f"{sim.root}/instagram/refresh_access_token",
        params={"grant_type": "ig_refresh_token"},
        token=long_lived,
    )
    assert status == 200, answer
    return answer


def facebook_exchange(sim, code: str) -> tuple[int, dict]:
    status, answer, _ = call(
        f"{sim.url}/oauth/access_token",
        params={"client_id": "1", "client_secret": "s", "redirect_uri": REDIRECT, "code": code},
        token=None,
    )
    return status, answer


def fb_code_used(sim, rec):
    accounts(sim)
    code = allowed_code(sim, "facebook")
    assert facebook_exchange(sim, code)[0] == 200
    status, answer = facebook_exchange(sim, code)
    assert status == 400  # as recorded (Graph's code 100 is a 400)
    return answer


def fb_user_token(sim) -> str:
    accounts(sim)
    status, answer = facebook_exchange(sim, allowed_code(sim, "facebook"))
    assert status == 200, answer
    return answer["access_token"]


def fb_long_lived(sim, rec):
    status, answer, _ = call(
        f"{sim.url}/oauth/access_token",
        params={
            "grant_type": "fb_exchange_token",
            "client_id": "1",
            "client_secret": "s",
            "fb_exchange_token": fb_user_token(sim),
        },
        token=None,
    )
    assert status == 200, answer
    return answer


def fb_pages(sim, rec):
    return get(f"{sim.url}/me/accounts", access_token=fb_user_token(sim))


def fb_debug_user_token(sim, rec):
    return get(f"{sim.url}/debug_token", input_token=fb_user_token(sim), access_token="1|s")


SCENARIOS = {
    "meta_instagram/answer_media__list_page": Scenario(ig_media_list),
    # The recorder rewrote the cursors (to "after") and kept no `before`.
    "meta_instagram/answer_comments__page": Scenario(
        ig_comments_page, drop=frozenset({"$.paging.cursors.before"})
    ),
    "meta_instagram/answer_comment__with_replies": Scenario(ig_comment_with_replies),
    "meta_instagram/answer_comments__documented": Scenario(ig_comments_documented, placeholder=True),
    # The recorder kept the replies' data only.
    "meta_instagram/answer_replies__list": Scenario(ig_replies, drop=frozenset({"$.paging"})),
    "meta_instagram/answer_public_reply__created": Scenario(ig_public_reply),
    "meta_instagram/answer_private_reply__sent": Scenario(ig_private_reply),
    # The recording stops after `data` (its author cut it): `paging` is not known.
    "meta_instagram/answer_conversations__list": Scenario(ig_conversations(2), drop=frozenset({"$.paging"})),
    "meta_instagram/answer_conversations__list_documented": Scenario(
        ig_conversations(7, limit=6), placeholder=True
    ),
    "meta_instagram/answer_conversations__user_id_documented": Scenario(
        ig_conversations(3, user_id="first"), placeholder=True
    ),
    "meta_instagram/answer_conversation__messages": Scenario(ig_conversation_messages(7, "messages")),
    # Meta's example asks messages{from,to} but shows id, created_time, is_unsupported: asked so.
    "meta_instagram/answer_conversation__messages_documented": Scenario(
        ig_conversation_messages(8, "messages.limit(7){id,created_time,is_unsupported}"), placeholder=True
    ),
    "meta_instagram/answer_message__details": Scenario(ig_message_details),
    "meta_instagram/answer_message__details_documented": Scenario(ig_message_details, placeholder=True),
    "meta_instagram/answer_error__code3_capability": Scenario(ig_private_reply_on_facebook_host),
    # A log excerpt: its fbtrace_id was not kept.
    "meta_instagram/answer_error__code10_window": Scenario(
        ig_private_reply_too_late, drop=frozenset({"$.error.fbtrace_id"})
    ),
    "meta_instagram/answer_error__code2500_ig_host": Scenario(ig_unknown_edge),
    # Recorded before Graph v24, which added `permissions` to the answer.
    "meta_instagram/answer_refresh_access_token__refreshed": Scenario(
        ig_token_refreshed, drop=frozenset({"$.permissions"})
    ),
    "meta_instagram/answer_refresh_access_token__with_permissions": Scenario(ig_refreshed_after_login),
    "meta_instagram/answer_oauth_access_token__documented": Scenario(
        ig_code_exchange("documented"), placeholder=True
    ),
    # As clients meet it live, unlike the documented `data` wrapper: flat, a numeric user_id.
    "meta_instagram/answer_oauth_access_token__flat": Scenario(ig_code_exchange("flat")),
    "meta_instagram/answer_oauth_access_token__code_used": Scenario(ig_code_used),
    "meta_instagram/answer_access_token__long_lived_documented": Scenario(ig_long_lived, placeholder=True),
    # The simulator serves id, created_time, message and updated_time of a post; the rest of the
    # recording's fields (attachments, picture, ...) are not compared.
    "meta_page/answer_feed__time_paged": Scenario(
        page_posts("feed", "238930000000901", 3, fields="id,created_time,message,updated_time", limit=2),
        keep={"$.data[]": {"id", "created_time", "message", "updated_time"}},
    ),
    "meta_page/answer_posts__time_paged": Scenario(
        page_posts("posts", "4", 6, fields="id,message,created_time", limit=5)
    ),
    # A Page feed paged by cursor (Graph v5.0): only its paging block is compared.
    "meta_page/answer_feed__cursor_paged": Scenario(
        page_posts("feed", "2121000000000901", 11, paging="cursor", mint=True, limit=10),
        keep={"$": {"paging"}},
    ),
    "meta_page/answer_post_comments__cursor_page": Scenario(page_post_comments),
    # A message with an attachment and folder tags: the fields the simulator serves are compared.
    "meta_page/answer_message__details_messenger": Scenario(
        page_message_details, keep={"$": {"id", "created_time", "from", "to"}}
    ),
    "meta_page/answer_subscribed_apps__subscribe_documented": Scenario(page_subscribed),
    # A log excerpt of a live answer; its fbtrace_id kept (replaced, same length).
    "meta_page/answer_oauth_access_token__code_used": Scenario(fb_code_used),
    # The recorder put words in the tokens.
    "meta_page/answer_oauth_access_token__fb_exchange": Scenario(fb_long_lived, placeholder=True),
    "meta_page/answer_me_accounts__pages": Scenario(fb_pages),
    # The recorder put words in the ids; its token had no `issued_at` (Meta's reference lists it).
    "meta_page/answer_debug_token__user": Scenario(
        fb_debug_user_token, drop=frozenset({"$.data.issued_at"}), placeholder=True
    ),
    "meta_page/answer_error__code100_object": Scenario(planted(100)),
    "meta_page/answer_error__code104_missing_token": Scenario(without_a_token),
    "meta_page/answer_error__code190_expired": Scenario(planted(190, subcode=463)),
    "meta_page/answer_error__code190_documented": Scenario(
        planted(190, subcode=460, user_title="A title", user_msg="A message")
    ),
    "meta_page/answer_error__code200_permission": Scenario(planted(200)),
}
ANSWERS = sorted(
    f"{p.parent.parent.name}/{p.stem}"
    for d in INSTAGRAM_AND_PAGE
    for p in FIXTURES.glob(f"{d}/recorded/answer_*.json")
)


def test_an_expired_token_is_refused_in_the_recorded_shape_and_wording(sim):
    """The recorded 190/463 is asked of the simulator's own token clock, not a planted fault."""
    name = "meta_page/answer_error__code190_expired"
    answer = expired_token(sim, recorded(name))
    assert compare(recorded(name), answer) == []
    assert re.fullmatch(
        r"Error validating access token: Session has expired on \w+day, \d\d-\w{3}-\d\d \d\d:\d\d:\d\d PST\. "
        r"The current time is \w+day, \d\d-\w{3}-\d\d \d\d:\d\d:\d\d PST\.",
        answer["error"]["message"],
    ), answer["error"]["message"]


def test_a_used_code_is_refused_in_each_hosts_recorded_wording(sim):
    """api.instagram.com and Graph word the same refusal differently (recorded, not documented)."""
    for name, ask, wording in (
        ("meta_instagram/answer_oauth_access_token__code_used", ig_code_used, lambda a: a["error_message"]),
        ("meta_page/answer_oauth_access_token__code_used", fb_code_used, lambda a: a["error"]["message"]),
    ):
        answer = ask(sim, recorded(name))
        assert compare(recorded(name), answer) == []
        assert wording(answer) == wording(recorded(name)), name


def test_every_recorded_answer_has_its_scenario():
    assert ANSWERS == sorted(SCENARIOS)


@pytest.mark.parametrize("name", ANSWERS)
def test_the_simulator_answers_in_the_recorded_shape(sim, name):
    scenario = SCENARIOS[name]
    rec = recorded(name)
    answer = scenario.ask(sim, rec)
    assert (
        compare(rec, answer, drop=scenario.drop, keep=scenario.keep, placeholder=scenario.placeholder) == []
    )


# -- the recorded notifications, sent again ---------------------------------------------------


def last_body(receiver, count: int = 1) -> dict:
    return json.loads(wait_for(receiver, count)[-1][0])


def sender(rec) -> str:
    """The person of a recorded messaging body (ids supplied by a test keep the recorded length)."""
    event = rec["entry"][0]["messaging"][0]
    return event["recipient"]["id"] if event["message"].get("is_echo") else event["sender"]["id"]


def notify_ig_dm(sim, receiver, rec):
    accounts(sim)
    dm(sim, from_id=sender(rec), text="hello", notify=True)
    return last_body(receiver)


def notify_messenger_dm(sim, receiver, rec):
    accounts(sim)
    dm(sim, account=PAGE, from_id=sender(rec), text="hello", notify=True)
    return last_body(receiver)


def notify_page_comment(sim, receiver, rec):
    accounts(sim)
    author = rec["entry"][0]["changes"][0]["value"]["from"]["id"]
    comment(
        sim,
        account=PAGE,
        post_id=media(sim, account=PAGE, object="page"),
        text="price?",
        from_id=author,
        notify=True,
    )
    return last_body(receiver)


def notify_ig_own_comment(sim, receiver, rec):
    accounts(sim)
    comment(sim, account=IG, media_id=media(sim), text="Thanks all", from_id=IG, notify=True)
    return last_body(receiver)


def notify_ig_echo(sim, receiver, rec):
    accounts(sim)
    target = comment(sim, account=IG, media_id=media(sim), text="LINK", from_id=sender(rec))
    call(
        f"{sim.instagram_url}/{IG}/messages",
        method="POST",
        body={"recipient": {"comment_id": target}, "message": {"text": "Here is the link"}},
    )
    return last_body(receiver)


NOTIFICATIONS = {
    "meta_instagram/webhook_messaging__message": Scenario(notify_ig_dm),
    # Wit.ai's `nlp` block comes only to Pages that turned NLP on.
    "meta_page/webhook_messaging__message_nlp": Scenario(
        notify_messenger_dm, drop=frozenset({"$.entry[].messaging[].message.nlp"})
    ),
    # Since 2024 (at least) a comment notification nests its `post`; Conduit's map needs none of it.
    "meta_page/webhook_feed__comment_add": Scenario(
        notify_page_comment, drop=frozenset({"$.entry[].changes[].value.post"})
    ),
    "meta_instagram/webhook_comments__self_authored": Scenario(notify_ig_own_comment),
    "meta_instagram/webhook_messaging__echo": Scenario(notify_ig_echo),
}


@pytest.mark.parametrize("name", sorted(NOTIFICATIONS))
def test_the_simulator_notifies_in_the_recorded_shape(notifying, receiver, name):
    scenario = NOTIFICATIONS[name]
    body = scenario.ask(notifying, receiver, recorded(name))
    assert compare(recorded(name), body, drop=scenario.drop, keep=scenario.keep) == []


# -- positive controls: the comparison sees a different shape ------------------------------------


def test_a_cursor_block_on_a_time_paged_feed_is_a_difference():
    rec = recorded("meta_page/answer_feed__time_paged")
    mutated = copy.deepcopy(rec)
    mutated["paging"]["cursors"] = {"before": "QVFIabc", "after": "QVFIdef"}
    mutated["paging"]["next"] = "https://graph.facebook.com/v2.8/238930000000901/feed?limit=25&after=QVFIdef"
    assert compare(rec, mutated) == [
        "$.paging.cursors: the simulator's, not recorded",
        "$.paging.next: recorded 'url:paging(__paging_token,until)', the simulator's 'url:paging(after)'",
    ]


def test_a_short_instagram_message_id_is_a_difference():
    rec = recorded("meta_instagram/answer_private_reply__sent")
    assert compare(rec, {**rec, "message_id": "m_test_0123456789abcdef01234567"}) == [
        "$.message_id: recorded 'ig-base64:~164', the simulator's 'messenger-mid:len31'"
    ]


def test_a_changed_type_a_missing_key_and_an_id_band_are_differences():
    rec = recorded("meta_instagram/answer_media__list_page")
    mutated = copy.deepcopy(rec)
    mutated["data"][0]["like_count"] = "0"
    del mutated["data"][1]["permalink"]
    mutated["data"][0]["id"] = "179"
    found = compare(rec, mutated)
    assert any("like_count" in line and "'int'" in line for line in found), found
    assert any("permalink" in line for line in found) or any("no recorded item" in line for line in found), (
        found
    )
    assert any(line.startswith("$.data[].id") and "digits:<=10" in line for line in found), found


def test_what_a_scenario_leaves_out_is_left_out_on_both_sides():
    rec = recorded("meta_instagram/answer_replies__list")
    simulated = {**rec, "paging": {"cursors": {"before": "a", "after": "b"}}}
    assert compare(rec, simulated) == ["$.paging: the simulator's, not recorded"]
    assert compare(rec, simulated, drop=frozenset({"$.paging"})) == []


# -- what the recorded shapes imply: time paging and the Conversations API ----------------------


def walk(url: str, **params) -> tuple[list[dict], list[dict]]:
    """Follow `paging.next` as given until it is absent: (every item, every answer)."""
    answers = [get(url, **params)]
    while "next" in answers[-1].get("paging", {}):
        answers.append(call(answers[-1]["paging"]["next"], token=None)[1])
    return [item for answer in answers for item in answer["data"]], answers


def test_the_time_paged_feed_tells_apart_posts_of_one_second(sim):
    """Five posts share a second: `until` (whole seconds) alone would repeat or skip them; with
    `__paging_token` every post comes once, newest first, and the last page has no `next`."""
    control(sim, "accounts", id=PAGE, object="page", name="Sample Page")
    ids = [
        media(sim, account=PAGE, object="page", created_time=1780000000 + (0 if i < 5 else i))
        for i in range(7)
    ]
    items, answers = walk(f"{sim.url}/{PAGE}/feed", limit=2, fields="id,created_time")
    assert [i["id"] for i in items] == list(reversed(ids))
    assert all("cursors" not in answer["paging"] for answer in answers)
    assert len(answers) == 4 and "next" not in answers[-1]["paging"]
    first = dict(parse_qsl(urlsplit(answers[0]["paging"]["next"]).query))
    # `next` keeps the request's parameters and the token (and the token: access_token here).
    assert (first["until"], first["fields"], first["limit"]) == ("1780000005", "id,created_time", "2")
    assert first["__paging_token"].startswith("enc_") and first["access_token"] == "tok_test"
    # A page inside the shared second: its `until` is that second, the token places the edge.
    inside = dict(parse_qsl(urlsplit(answers[1]["paging"]["next"]).query))
    assert inside["until"] == "1780000000"
    # `previous` goes back to what is newer than the page's first post.
    previous = dict(parse_qsl(urlsplit(answers[2]["paging"]["previous"]).query))
    assert (previous["since"], previous["__previous"]) == ("1780000000", "1")
    back = call(answers[2]["paging"]["previous"], token=None)[1]
    assert [i["id"] for i in back["data"]] == [i["id"] for i in answers[1]["data"]]


def test_a_window_survives_time_paging(sim):
    """Conduit's own `since`/`until` ([since, until)) hold on every page followed."""
    control(sim, "accounts", id=PAGE, object="page", name="Sample Page")
    ids = [media(sim, account=PAGE, object="page", created_time=1780000000 + i * 3600) for i in range(6)]
    items, answers = walk(f"{sim.url}/{PAGE}/posts", limit=1, since=1780003600, until=1780014400)
    assert [i["id"] for i in items] == [ids[3], ids[2], ids[1]] and len(answers) == 3


def test_private_replies_and_dms_meet_in_one_conversation(sim):
    """The private reply's `message_id` is the message's id in the conversation with the commenter,
    beside the DMs the person sent; the list is newest first; `user_id` finds that one."""
    accounts(sim)
    dm(sim, from_id=PERSON, text="hello", created_time=time.time() - 60)
    dm(sim, from_id="9876543210987654", text="someone else", created_time=time.time() - 30)
    target = comment(sim, account=IG, media_id=media(sim), text="LINK", from_id=PERSON)
    sent = call(
        f"{sim.instagram_url}/{IG}/messages",
        method="POST",
        body={"recipient": {"comment_id": target}, "message": {"text": "Here is the link"}},
    )[1]
    listed = get(f"{sim.instagram_url}/{IG}/conversations", platform="instagram")["data"]
    assert len(listed) == 2 and listed[0]["updated_time"] >= listed[1]["updated_time"]
    (mine,) = get(f"{sim.instagram_url}/{IG}/conversations", user_id=PERSON)["data"]
    assert mine["id"] == listed[0]["id"]  # the private reply made it the newest
    messages = get(f"{sim.instagram_url}/{mine['id']}", fields="messages{id,from,to,message}")["messages"][
        "data"
    ]
    assert [m["id"] for m in messages][0] == sent["message_id"]
    assert messages[0]["from"]["id"] == IG and messages[0]["to"]["data"][0]["id"] == PERSON
    assert messages[1]["from"]["id"] == PERSON and messages[1]["message"] == "hello"
    details = get(f"{sim.url}/{sent['message_id']}", fields="id,created_time,from,to,message")
    assert details["message"] == "Here is the link"


def test_a_page_token_reaches_the_linked_instagram_account_and_its_own_messenger(sim):
    accounts(sim, linked=True)
    ig = dm(sim, from_id=PERSON, text="on instagram")
    messenger = dm(sim, account=PAGE, from_id="7777777777777777", text="on messenger")
    instagram = get(f"{sim.url}/{PAGE}/conversations", platform="instagram")["data"]
    assert [c["id"] for c in instagram] == [ig["conversation_id"]]
    assert [c["id"] for c in get(f"{sim.url}/{PAGE}/conversations", platform="messenger")["data"]] == [
        messenger["conversation_id"]
    ]
    assert messenger["conversation_id"].startswith("t_") and messenger["mid"].startswith("m_")
    # Messenger objects are not on the Instagram host.
    assert call(f"{sim.instagram_url}/{messenger['mid']}")[0] == 400


def test_details_come_for_the_20_newest_messages_only(sim):
    """Meta: "You can only get details about the 20 most recent messages"; older ones answer an error."""
    accounts(sim)
    sent = [dm(sim, from_id=PERSON, text=f"m{i}", created_time=time.time() - 100 + i) for i in range(23)]
    conversation = sent[0]["conversation_id"]
    page = get(f"{sim.instagram_url}/{conversation}", fields="messages{id,created_time,from,message}")[
        "messages"
    ]
    assert [m["id"] for m in page["data"]] == [s["mid"] for s in reversed(sent)]
    assert all("message" in m for m in page["data"][:20]) and not any(
        "message" in m for m in page["data"][20:]
    )
    assert "paging" not in page  # one page held them all (limit 25)
    status, answer, _ = call(f"{sim.instagram_url}/{sent[0]['mid']}", params={"fields": "id,message"})
    assert status == 400 and answer["error"]["code"] == 100
    assert get(f"{sim.instagram_url}/{sent[5]['mid']}", fields="id,message")["message"] == "m5"
    # A longer thread pages by `cursors.after` and `next`, the subfields kept.
    page = get(f"{sim.instagram_url}/{conversation}", fields="messages.limit(10){id,message}")["messages"]
    assert set(page["paging"]) == {"cursors", "next"} and set(page["paging"]["cursors"]) == {"after"}
    following = call(page["paging"]["next"], token=None)[1]
    assert [m["id"] for m in following["data"]] == [s["mid"] for s in reversed(sent)][10:20]
    assert all(set(m) == {"id", "message"} for m in following["data"])


def test_ids_are_minted_in_metas_shapes(sim):
    accounts(sim)
    ig_media, post = media(sim), media(sim, account=PAGE, object="page")
    ig_comment = comment(sim, account=IG, media_id=ig_media, text="x", from_id=PERSON)
    page_comment = comment(sim, account=PAGE, post_id=post, text="x", from_id=PERSON)
    mid = dm(sim, from_id=PERSON, text="x")["mid"]
    assert re.fullmatch(r"\d{17}", ig_media) and re.fullmatch(r"\d{17}", ig_comment)
    assert re.fullmatch(rf"{PAGE}_\d{{16}}", post)
    assert re.fullmatch(rf"{post.split('_')[1]}_\d{{16}}", page_comment)
    assert len(mid) == 164 and mid.startswith("aWdf") and re.fullmatch(r"[A-Za-z0-9_-]+", mid)
    assert re.fullmatch(r"m_[A-Za-z0-9_-]{86}", dm(sim, account=PAGE, from_id=PERSON, text="x")["mid"])


@pytest.mark.parametrize(
    "code, expected",
    [
        (3, "(#3) Application does not have the capability to make this API call."),
        (200, "(#200) Requires pages_messaging permission to manage the object"),
        (230, "(#230) Requires pages_messaging_subscriptions permission to manage the object"),
        (299, None),
    ],
)
def test_codes_3_and_200_to_299_can_be_planted(sim, code, expected):
    accounts(sim)
    control(sim, "faults", mode="error", code=code, count=1)
    status, answer, _ = call(f"{sim.url}/{PAGE}/feed")
    error = answer["error"]
    assert (error["code"], error["type"]) == (code, "OAuthException")
    assert set(error) == {"message", "type", "code", "fbtrace_id"}
    assert status == (400 if code == 3 else 403)
    if expected:
        assert error["message"] == expected
    else:
        assert error["message"].startswith(f"(#{code}) ")
