"""Property-based fuzzing of the APIs: whatever is sent, the answer is never 5xx and every error is JSON with a code."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tests.conftest import fixture_body

pytestmark = pytest.mark.django_db
FUZZ = hsettings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def api(api):
    api.raise_request_exception = False  # a 500 is an answer to check, not an exception
    return api


def assert_chosen_answer(response, ok: tuple[int, ...] = (200,)) -> None:
    """Never 5xx; JSON always; an error carries a stable snake_case `code`."""
    assert response.status_code < 500, (response.status_code, response.content[:300])
    assert response["Content-Type"] == "application/json", (response.status_code, response["Content-Type"])
    payload = json.loads(response.content)
    if response.status_code not in ok:
        assert 400 <= response.status_code < 500, response.status_code
        assert isinstance(payload.get("code"), str) and payload["code"].replace("_", "").isalnum(), payload
        assert payload["code"] == payload["code"].lower()


# Hostile text: anything, control characters, and lone surrogates.
_text = (
    st.text(max_size=30)
    | st.text(st.characters(max_codepoint=0x9F), max_size=10)
    | st.text(st.characters(categories=["Cs"]), min_size=1, max_size=3)
    | st.sampled_from(["\x00", "a\x00b", "\u2028", "\ud800", "\udfff", "replay", "apply", "deliver", "sent"])
)


class Raw(str):
    """A JSON token written as is (numbers no decoder should turn into a float)."""


_huge = st.sampled_from(
    ["1e400", "-1e400", "0.1e99999", "1" + "0" * 5000, "-0", "1E+308", "5e-324", "599.0"]
).map(Raw)
_leaf = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | _text
    | _huge
)
_json = st.recursive(
    _leaf,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=20,
)


def dump(value) -> str:
    """JSON text, lone surrogates escaped (as a client's ensure_ascii writes them), Raw tokens verbatim."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, list):
        return "[" + ",".join(dump(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(key)}:{dump(item)}" for key, item in value.items()) + "}"
    return json.dumps(value)


_attempt = st.fixed_dictionaries(
    {},
    optional={
        "transport": st.sampled_from(["not_sent", "sent", "response_received"]) | _json,
        "http_status": st.integers(100, 599) | _huge | _json,
        "evidence": _text | _json,
        "at": _text,
    },
)
_almost_valid = st.fixed_dictionaries(
    {
        "decision": st.just("replay") | _json,
        "proposal": st.fixed_dictionaries(
            {"operation": st.sampled_from(["apply", "deliver"]) | _text, "key": _text, "digest": _text},
            optional={"kind": _json, "delta": _text | _huge},
        ),
    },
    optional={
        "attempts": st.lists(_attempt, max_size=3) | _json,
        "events": _json,
        "destination": _json,
        "extra": _json,
    },
)
_nested = st.integers(1, 3000).map(lambda n: "[" * n + "]" * n) | st.integers(1, 3000).map(
    lambda n: '{"a":' * n + "1" + "}" * n
)


@FUZZ
@given(st.one_of(_json.map(dump), _almost_valid.map(dump), _nested, st.binary(max_size=50).map(bytes)))
def test_the_decision_api_never_answers_5xx(api, body):
    response = api.post("/api/decisions/", body, content_type="application/json")
    assert_chosen_answer(response)
    if response.status_code == 200:
        assert {"verdict", "next", "questions"} <= set(response.json())


@hsettings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.sampled_from(
        [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/json; charset=latin-1",
            "application/xml",
            "application/octet-stream",
        ]
    ),
    _json.map(dump),
)
def test_the_decision_api_answers_every_content_type(api, content_type, body):
    assert_chosen_answer(api.post("/api/decisions/", body, content_type=content_type))


def encode_query(params: list[tuple[str, str]]) -> str:
    """A query string as any client may send it: lone surrogates go out as the bytes surrogatepass makes."""
    return "&".join(
        f"{quote(name.encode('utf-8', 'surrogatepass'), safe='')}={quote(value.encode('utf-8', 'surrogatepass'), safe='')}"
        for name, value in params
    )


_value = (
    _text
    | st.integers(-10, 10**30).map(str)
    | st.sampled_from(
        [
            "RECORD_READY",
            "QUARANTINED",
            "sandbox",
            "json",
            "xml",
            "cD0x",
            "cD1hYmM=",
            "%",
            "+",
            "",
        ]
    )
)
_PARAMETERS = {
    "/api/events/": ["event_key", "source", "state", "cursor", "page_size", "format"],
    "/api/quarantine/": ["source", "state", "cursor", "page_size", "format"],
}


@FUZZ
@given(
    st.sampled_from(sorted(_PARAMETERS)).flatmap(
        lambda path: st.tuples(
            st.just(path),
            st.lists(st.tuples(st.sampled_from(_PARAMETERS[path]) | _text, _value), max_size=4),
        )
    )
)
def test_the_read_api_never_answers_5xx_for_any_query(api, read_api_rows, path_and_params):
    path, params = path_and_params
    response = api.get(f"{path}?{encode_query(params)}")
    assert_chosen_answer(response)
    if response.status_code == 200:
        assert set(response.json()) == {"next", "previous", "results"}


@pytest.fixture
def read_api_rows(sandbox_source, deliver):
    """A few events and a receipt, so that the filters and cursors run against real rows."""
    deliver(fixture_body("comment__batch"))
    deliver(fixture_body("comment__missing_post_id"))


@pytest.mark.parametrize("param", sorted({p for ps in _PARAMETERS.values() for p in ps}))
def test_control_each_parameter_is_reached_by_the_fuzzer(api, read_api_rows, param):
    """A NUL in each parameter is answered with a 4xx, not ignored and not a 500 (the fuzz covers each)."""
    for path, params in _PARAMETERS.items():
        if param in params:
            query = encode_query([(param, "a\x00b")])
            response = api.get(f"{path}?{query}")
            assert_chosen_answer(response)
            assert response.status_code in (400, 404), (path, param, response.status_code)


def test_control_the_check_catches_a_5xx_and_an_html_error(api, settings):
    """Positive control for assert_chosen_answer: a server error page fails it."""
    from django.http import HttpResponse

    with pytest.raises(AssertionError):
        assert_chosen_answer(
            HttpResponse("<h1>Server Error (500)</h1>", status=500, content_type="text/html")
        )
    with pytest.raises(AssertionError):
        assert_chosen_answer(HttpResponse("<h1>Bad Request</h1>", status=400, content_type="text/html"))
