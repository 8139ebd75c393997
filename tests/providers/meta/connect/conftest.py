"""The Connect buttons against the Graph simulator: an app configured for both login flows, its
secrets in their declared variables, credential keys set, and the simulator's consent page driven
over HTTP as a browser would (the browser test drives it in chromium)."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from cryptography.fernet import Fernet

from simulators.meta import serve

APP_ID = "900000000000001"
CONFIG_ID = "700000000000001"
IG_ACCOUNT = "17841400000000001"
PAGES = ("100000000000001", "100000000000002")
# Test-only values generated for the suite; they sign nothing real.
APP_SECRET = "0123456789abcdef0123456789abcdef"
VERIFY_TOKEN = "verify-token-test-only-01"
CHANGELIST = "/admin/ingress/source/"


@pytest.fixture
def graph(db, settings, monkeypatch):
    """The simulator holding one Instagram account and two Pages, none subscribed to the app yet,
    and the deployment's connect settings pointed at it."""
    simulator = serve(app_id=APP_ID, app_secret=APP_SECRET, hang_seconds=1)
    simulator.control(
        "/_sim/accounts",
        {"id": IG_ACCOUNT, "object": "instagram", "username": "user_test_01", "subscribed_fields": []},
    )
    for number, page in enumerate(PAGES, 1):
        simulator.control(
            "/_sim/accounts",
            {"id": page, "object": "page", "name": f"Test Page {number:02}", "subscribed_fields": []},
        )
    settings.CONDUIT_META_APP_ID = settings.CONDUIT_INSTAGRAM_APP_ID = APP_ID
    settings.CONDUIT_META_LOGIN_CONFIG_ID = CONFIG_ID
    settings.CONDUIT_CONNECT_SIMULATOR_URL = simulator.root
    settings.CONDUIT_CREDENTIAL_KEYS = (Fernet.generate_key().decode(),)
    for variable in ("CONDUIT_SOURCE_META_APP_SECRET", "CONDUIT_SOURCE_INSTAGRAM_APP_SECRET"):
        monkeypatch.setenv(variable, APP_SECRET)
    monkeypatch.setenv("CONDUIT_SOURCE_META_VERIFY_TOKEN", VERIFY_TOKEN)
    yield simulator
    simulator.close()


class _Form(HTMLParser):
    """The consent page's form: its hidden fields and whether it has the Allow button."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}
        self.allow = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "input" and a.get("type") == "hidden":
            self.fields[a["name"]] = a.get("value", "")

    def handle_data(self, data: str) -> None:
        self.allow = self.allow or data.strip() == "Allow"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Read a redirect (its Location) instead of following it."""

    def redirect_request(self, *args, **kwargs):
        return None


def consent(authorize_url: str) -> str:
    """Open the platform's consent page, press Allow, and return where it redirects the owner
    (the callback URL with code and state), without following it."""
    with urllib.request.urlopen(authorize_url, timeout=5) as page:
        form = _Form()
        form.feed(page.read().decode())
    assert form.allow, "the consent page has no Allow button"
    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(urllib.request.Request(authorize_url, data=urlencode(form.fields).encode()), timeout=5)
    except urllib.error.HTTPError as redirect:
        assert redirect.code == 302
        return redirect.headers["Location"]
    raise AssertionError("Allow did not redirect")


def local(url: str) -> str:
    """The path and query of a URL on the test server (the Django test client takes those)."""
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def start(client, login: str, **form) -> str:
    """Press Connect <login> (or Reconnect, with source=): the platform URL the owner is sent to."""
    response = client.post(f"{CHANGELIST}connect/{login}/", form)
    assert response.status_code == 302, response.content[:400]
    return response["Location"]


def query_of(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(re.sub(r"#.*$", "", url)).query).items()}
