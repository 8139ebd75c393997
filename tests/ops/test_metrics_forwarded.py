"""GET /metrics over real HTTP from loopback with no token: forwarding headers never make a scrape local.

A header-list rule (a request is local when it comes from loopback and carries none of
X-Forwarded-For, Forwarded and X-Real-IP) lets a proxy on this host that sets any other header (each
one below) pass its clients through without the token. The rule is the deployment's word
(docs/reference/http.md#metrics-access):
without a token, /metrics answers only while CONDUIT_METRICS_LOOPBACK=on says no proxy stands in
front, and then only connections from this host. Served by Django's live server (a real socket, so
REMOTE_ADDR is the connection's own address) on a free loopback port.
"""

from __future__ import annotations

import ipaddress
import urllib.error
import urllib.request

import pytest

# Headers a proxy sets that the old list did not name; each alone came through from loopback.
FORWARDING_HEADERS = {
    "X-Forwarded-Proto": "https",
    "X-Forwarded-Host": "conduit.example.invalid",
    "Via": "1.1 proxy.example.invalid",
    "X-Client-IP": "203.0.113.9",
    "True-Client-IP": "203.0.113.9",
    "CF-Connecting-IP": "203.0.113.9",
    "X-Original-Forwarded-For": "203.0.113.9",
}


def scrape(live_server, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(f"{live_server.url}/metrics", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


@pytest.fixture
def tokenless(settings, transactional_db):
    settings.CONDUIT_METRICS_TOKEN = ""
    return settings


@pytest.mark.parametrize("header", FORWARDING_HEADERS)
def test_a_forwarding_header_alone_from_loopback_is_refused_without_the_loopback_word(
    live_server, tokenless, header
):
    tokenless.CONDUIT_METRICS_LOOPBACK = False
    status, body = scrape(live_server, {header: FORWARDING_HEADERS[header]})
    # The reason, not only the status: a longer header list would refuse this request too, but as
    # metrics_loopback_only, and would still serve the next header nobody listed.
    assert (status, body.split("\n", 1)[0]) == (403, "metrics_loopback_off")
    assert "CONDUIT_METRICS_TOKEN" in body and "CONDUIT_METRICS_LOOPBACK=on" in body


@pytest.mark.parametrize("header", FORWARDING_HEADERS)
def test_a_forwarding_header_changes_nothing_once_the_deployment_says_no_proxy(
    live_server, tokenless, header
):
    tokenless.CONDUIT_METRICS_LOOPBACK = True
    status, body = scrape(live_server, {header: FORWARDING_HEADERS[header]})
    assert status == 200, body
    assert "conduit_ledger_up" in body


def test_without_any_header_loopback_is_refused_too_without_the_loopback_word(live_server, tokenless):
    tokenless.CONDUIT_METRICS_LOOPBACK = False
    status, body = scrape(live_server, {})
    assert (status, body.split("\n", 1)[0]) == (403, "metrics_loopback_off")


def _old_header_list_rule(request) -> bool:
    """The header-list rule, kept here as a control to show the hole it leaves."""
    if any(h in request.META for h in ("HTTP_X_FORWARDED_FOR", "HTTP_FORWARDED", "HTTP_X_REAL_IP")):
        return False
    try:
        return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        return False


def test_positive_control_the_old_header_list_rule_serves_the_x_forwarded_proto_request(
    live_server,
    tokenless,
    monkeypatch,
):
    """The requests above reach the server with their header and from loopback: under the old rule
    the X-Forwarded-Proto one is served without a token, so the refusal above is the new rule's."""
    from conduit import metrics

    tokenless.CONDUIT_METRICS_LOOPBACK = False

    def old_metrics_allowed(request):
        return None if _old_header_list_rule(request) else metrics._refusal(403, "metrics_loopback_only")

    monkeypatch.setattr(metrics, "metrics_allowed", old_metrics_allowed)
    status, body = scrape(live_server, {"X-Forwarded-Proto": "https"})
    assert status == 200, body
    # The same harness does carry a listed header to the old rule, which refused it.
    status, body = scrape(live_server, {"X-Forwarded-For": "203.0.113.9"})
    assert (status, body.split("\n", 1)[0]) == (403, "metrics_loopback_only")
