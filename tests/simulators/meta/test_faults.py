"""Fault modes: Meta error envelopes with usage headers, real timeouts, dropped connections, latency."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error

import pytest

from tests.simulators.meta.helpers import IG, add_comment, call


def fault(sim, **data) -> None:
    status, answer, _ = call(f"{sim.root}/_sim/faults", method="POST", body=data)
    assert status == 200, answer


@pytest.fixture
def media(sim):
    add_comment(sim, account=IG, media_id="m_f", text="x", from_id="u1")
    return f"{sim.url}/m_f/comments"


def test_error_fault_answers_meta_envelope_with_business_usage(sim, media):
    fault(sim, mode="error", code=80002, status=400, retry_minutes=7, count=1)
    status, answer, headers = call(media)
    assert status == 400
    error = answer["error"]
    assert (error["code"], error["type"], error["is_transient"]) == (80002, "OAuthException", True)
    assert error["fbtrace_id"] and "error_user_msg" in error and "error_user_title" in error
    usage = json.loads(headers["X-Business-Use-Case-Usage"])
    assert usage[IG][0]["estimated_time_to_regain_access"] == 7
    assert usage[IG][0]["type"] == "instagram"
    assert call(media)[0] == 200  # count=1: the next call is served


def test_error_fault_carries_code_subcode_status(sim, media):
    fault(sim, mode="error", code=190, subcode=463, count=2)
    for _ in range(2):
        status, answer, headers = call(media)
        assert status == 400
        assert (answer["error"]["code"], answer["error"]["error_subcode"]) == (190, 463)
        assert "X-Business-Use-Case-Usage" not in headers
    fault(sim, mode="error", code=2, status=503)
    status, answer, _ = call(media)
    assert status == 503 and answer["error"]["is_transient"] is True
    assert call(media)[0] == 200


def test_path_contains_targets_only_matching_calls(sim, media):
    add_comment(sim, account=IG, media_id="m_other", text="x", from_id="u1")
    fault(sim, mode="error", code=4, path_contains="/m_other/", count=1)
    assert call(media)[0] == 200
    status, answer, _ = call(f"{sim.url}/m_other/comments")
    assert status == 400 and answer["error"]["code"] == 4


def test_timeout_fault_holds_past_the_client_timeout(sim, media):
    fault(sim, mode="timeout", hang_seconds=3)
    started = time.monotonic()
    with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
        call(media, timeout=0.5)
    assert time.monotonic() - started < 2.5  # the client gave up; the simulator was still holding
    assert call(media)[0] == 200


def test_drop_fault_closes_the_connection_without_an_answer(sim, media):
    fault(sim, mode="drop")
    connection = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=5)
    connection.request("GET", "/v26.0/m_f/comments?access_token=tok")
    with pytest.raises(http.client.RemoteDisconnected):
        connection.getresponse()
    connection.close()
    assert call(media)[0] == 200


def test_latency_fault_delays_then_serves(sim, media):
    fault(sim, mode="latency", latency_ms=400)
    started = time.monotonic()
    assert call(media)[0] == 200
    assert time.monotonic() - started >= 0.4
    started = time.monotonic()
    call(media)
    assert time.monotonic() - started < 0.4


def test_calls_counts_graph_calls_by_path_not_control_calls(sim, media):
    call(f"{sim.root}/_sim/calls", method="DELETE")
    call(media)
    call(media)
    call(f"{sim.instagram_url}/{IG}/media")
    status, answer, _ = call(f"{sim.root}/_sim/calls")
    assert answer["calls"] == 3
    assert answer["by_path"] == {"/v26.0/m_f/comments": 2, f"/instagram/v26.0/{IG}/media": 1}


def test_unknown_fault_mode_is_refused(sim):
    status, answer, _ = call(f"{sim.root}/_sim/faults", method="POST", body={"mode": "explode"})
    assert status == 400
