"""The Graph client: bounded reads, Meta's error envelope kept as numbers only, and what each code means."""

from __future__ import annotations

import json

import pytest

from conduit.providers.meta import graph
from conduit.providers.meta.graph import GraphCallFailed, GraphError, graph_get, retry_after_seconds
from tests.providers.meta.reader.support import IG_ACCOUNT, TOKEN


def _seed(sim) -> None:
    sim.state.comment_create(
        {"account": IG_ACCOUNT, "media_id": "18000000000000001", "text": "hello", "from_id": "9001"}
    )


def _get(sim, path: str, **params) -> graph.GraphResponse:
    return graph_get(base_url=sim.instagram_url, path=path, params=params, access_token=TOKEN, timeout=5)


def _error(sim, path: str, **params) -> GraphError:
    with pytest.raises(GraphError) as caught:
        _get(sim, path, **params)
    return caught.value


def test_a_read_returns_the_document_and_its_size(sim):
    _seed(sim)
    response = _get(sim, f"{IG_ACCOUNT}/media", fields="id,timestamp")
    assert [m["id"] for m in response.document["data"]] == ["18000000000000001"]
    assert response.size_bytes == len(json.dumps(response.document).encode())


@pytest.mark.parametrize("code", sorted(graph.THROTTLING_CODES))
def test_each_throttling_code_means_throttled(sim, code):
    sim.state.fault_add({"mode": "error", "code": code, "count": 1})
    assert _error(sim, f"{IG_ACCOUNT}/media").meaning == graph.THROTTLED


def test_throttling_carries_the_announced_wait_in_seconds(sim):
    """docs/platforms/meta.md#reading-back: throttling backs off "using estimated_time_to_regain_access when present" (minutes)."""
    _seed(sim)
    sim.state.fault_add({"mode": "error", "code": 80002, "count": 1, "retry_minutes": 7})
    error = _error(sim, f"{IG_ACCOUNT}/media")
    assert (error.status, error.code, error.meaning, error.retry_after) == (400, 80002, "throttled", 420.0)
    sim.state.fault_add({"mode": "error", "code": 4, "count": 1})
    assert _error(sim, f"{IG_ACCOUNT}/media").retry_after is None  # no header: nothing announced


@pytest.mark.parametrize("subcode", [None, 458, 460, 463, 467])
def test_190_means_token_invalid_whatever_the_subcode(sim, subcode):
    sim.state.fault_add({"mode": "error", "code": 190, "subcode": subcode, "count": 1})
    error = _error(sim, f"{IG_ACCOUNT}/media")
    assert (error.code, error.subcode, error.meaning) == (190, subcode, graph.TOKEN_INVALID)


def test_a_missing_token_is_answered_190(sim):
    _seed(sim)
    with pytest.raises(GraphError) as caught:
        graph_get(
            base_url=sim.instagram_url, path=f"{IG_ACCOUNT}/media", params={}, access_token="", timeout=5
        )
    assert caught.value.meaning == graph.TOKEN_INVALID


def test_code_100_is_an_expired_cursor_only_on_a_request_that_carried_after(sim):
    _seed(sim)
    for i in range(3):
        sim.state.comment_create(
            {"account": IG_ACCOUNT, "media_id": f"1800000000000010{i}", "text": "x", "from_id": "9001"}
        )
    first = _get(sim, f"{IG_ACCOUNT}/media", limit="1").document
    sim.state.expire_cursors()
    expired = _error(sim, f"{IG_ACCOUNT}/media", limit="1", after=first["paging"]["cursors"]["after"])
    assert (expired.code, expired.meaning) == (100, graph.EXPIRED_CURSOR)
    unknown = _error(sim, "17999999999999999/comments")  # 100/33 without a cursor: the object is gone
    assert (unknown.code, unknown.subcode, unknown.meaning) == (100, 33, graph.FAILED)


def test_5xx_and_is_transient_mean_transient(sim):
    sim.state.fault_add({"mode": "error", "code": 2, "count": 1})  # the simulator answers 500, is_transient
    error = _error(sim, f"{IG_ACCOUNT}/media")
    assert (error.status, error.is_transient, error.meaning) == (500, True, graph.TRANSIENT)
    unknown = GraphError(
        status=400, code=12345, subcode=None, is_transient=False, fbtrace_id="", retry_after=None
    )
    assert unknown.meaning == graph.FAILED  # an unknown code takes the conservative outcome


def test_meta_text_is_never_kept(sim):
    """Meta's message "may carry anything": only numbers and a token-shaped trace id are kept."""
    sim.state.fault_add(
        {
            "mode": "error",
            "code": 10,
            "subcode": 2534022,
            "status": 403,
            "count": 1,
            "message": "leaked-text password=hunter2",
        }
    )
    error = _error(sim, f"{IG_ACCOUNT}/media")
    kept = json.dumps({k: str(v) for k, v in vars(error).items()}) + str(error) + repr(error)
    assert "leaked-text" not in kept and "hunter2" not in kept and TOKEN not in kept
    assert (error.code, error.subcode, error.status) == (10, 2534022, 403)
    assert error.fbtrace_id and error.fbtrace_id.isascii()


def test_an_answer_over_max_bytes_is_refused_without_reading_it_whole(sim):
    _seed(sim)
    size = _get(sim, f"{IG_ACCOUNT}/media").size_bytes
    with pytest.raises(GraphCallFailed) as caught:
        graph_get(
            base_url=sim.instagram_url,
            path=f"{IG_ACCOUNT}/media",
            params={},
            access_token=TOKEN,
            timeout=5,
            max_bytes=size - 1,
        )
    assert caught.value.kind == "too_large"
    assert (
        graph_get(
            base_url=sim.instagram_url,
            path=f"{IG_ACCOUNT}/media",
            params={},
            access_token=TOKEN,
            timeout=5,
            max_bytes=size,
        ).size_bytes
        == size
    )  # exactly the limit is fine


def test_a_timeout_and_a_dropped_connection_are_their_own_kinds(sim):
    sim.state.fault_add({"mode": "timeout", "count": 1, "hang_seconds": 2})
    with pytest.raises(GraphCallFailed) as caught:
        graph_get(
            base_url=sim.instagram_url, path=f"{IG_ACCOUNT}/media", params={}, access_token=TOKEN, timeout=0.3
        )
    assert caught.value.kind == "timeout"
    sim.state.fault_add({"mode": "drop", "count": 1})
    with pytest.raises(GraphCallFailed) as caught:
        _get(sim, f"{IG_ACCOUNT}/media")
    assert caught.value.kind == "transport" and caught.value.sent


@pytest.mark.parametrize(
    "url", ["http://graph.facebook.com/v26.0", "ftp://127.0.0.1/v26.0", "http://10.0.0.1:8080/v26.0"]
)
def test_plain_http_off_this_host_is_refused_before_connecting(url, loopback_only):
    with pytest.raises(GraphCallFailed) as caught:
        graph_get(base_url=url, path="me", params={}, access_token=TOKEN, timeout=1)
    assert (caught.value.kind, caught.value.sent) == ("url_refused", False)
    assert loopback_only == []  # no connection was attempted


@pytest.mark.parametrize(
    "header, seconds",
    [
        ('{"1": [{"type": "pages", "estimated_time_to_regain_access": 5}]}', 300.0),
        (
            '{"1": [{"estimated_time_to_regain_access": 2}], "2": [{"estimated_time_to_regain_access": 9}]}',
            540.0,
        ),
        ('{"1": [{"estimated_time_to_regain_access": 0}]}', None),
        ('{"1": [{"estimated_time_to_regain_access": "3"}]}', 180.0),
        ('{"1": [{"estimated_time_to_regain_access": 100000}]}', float(graph.MAX_RETRY_AFTER_SECONDS)),
        ("not json", None),
        ("[]", None),
        ('{"1": "x"}', None),
        (None, None),
    ],
)
def test_retry_after_reads_the_business_use_case_header(header, seconds):
    assert retry_after_seconds(header) == seconds
