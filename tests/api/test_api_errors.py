"""docs/reference/http.md#api-errors: every answer under /api/ is chosen, and every error is JSON with a stable code."""

import base64
import json

import pytest
from django.core.exceptions import RequestDataTooBig
from django.test import RequestFactory, override_settings
from django.urls import path

from conduit import api as conduit_api

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(api):
    # A 500 must come back as a response (as a client sees it), not as a raised exception.
    api.raise_request_exception = False
    return api


def assert_json_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:300])
    assert response["Content-Type"] == "application/json", response["Content-Type"]
    payload = response.json()
    assert payload["code"] == code, payload
    assert "detail" in payload or "errors" in payload
    return payload


# Query parameters: NUL reached PostgreSQL ("text fields cannot contain NUL") and was a 500.


@pytest.mark.parametrize(
    "url, parameter",
    [
        ("/api/events/?event_key=a%00b", "event_key"),
        ("/api/events/?source=a%00b", "source"),
        ("/api/quarantine/?source=%00", "source"),
        ("/api/events/?event_key=%01", "event_key"),
        ("/api/events/?source=x%1b%5b31m", "source"),
        ("/api/events/?event_key=a%7Fb", "event_key"),
        ("/api/events/?event_key=a%C2%85b", "event_key"),  # C1 NEL
        ("/api/quarantine/?source=a%E2%80%A8b", "source"),  # U+2028 LINE SEPARATOR
        ("/api/events/?event_key=" + "k" * 513, "event_key"),
        ("/api/quarantine/?source=" + "s" * 65, "source"),
        ("/api/events/?page_size=0", "page_size"),
        ("/api/events/?page_size=%00", "page_size"),
        ("/api/quarantine/?state=%00", "state"),
    ],
)
def test_a_refused_query_parameter_is_a_400_naming_it(api, url, parameter):
    payload = assert_json_error(api.get(url), 400, "invalid")
    assert list(payload["errors"]) == [parameter]


def test_printable_values_still_filter(api):
    assert api.get("/api/events/", {"event_key": "sandbox-social:acct_test_01:x y é"}).status_code == 200
    assert api.get("/api/quarantine/", {"source": ""}).status_code == 200


def _cursor(query: str) -> str:
    return base64.b64encode(query.encode()).decode()


@pytest.mark.parametrize(
    "cursor",
    [
        _cursor("p=abc"),  # a position that is not an id: was a 500 (ValueError in the query)
        _cursor("p=\x00"),
        _cursor("p=99999999999999999999999"),
        "not-base64!",  # DRF's own refusal, a 404 before: now a 400 like every bad parameter
        _cursor("o=x"),
    ],
)
def test_a_cursor_this_api_did_not_issue_is_a_400(api, cursor):
    assert_json_error(api.get("/api/events/", {"cursor": cursor}), 400, "invalid_cursor")


def test_an_issued_cursor_still_pages(api, sandbox_source, deliver):
    from tests.conftest import fixture_body

    deliver(fixture_body("comment__batch"))
    first = api.get("/api/events/", {"page_size": 1}).json()
    assert first["next"] and api.get(first["next"]).status_code == 200


# The decision API's body.


def post_raw(api, body: str | bytes, content_type: str = "application/json"):
    return api.post("/api/decisions/", body, content_type=content_type)


def test_a_hundred_thousand_nested_arrays_is_a_400_not_a_recursion_error(api):
    assert_json_error(post_raw(api, "[" * 100_000 + "]" * 100_000), 400, "nesting_too_deep")


def test_nesting_is_bounded_below_the_recursion_limit():
    """A body the decoder can still read but nested past the bound is refused too."""
    deep = json.loads("[" * 33 + "]" * 33)
    assert conduit_api.json_refusal(deep).get_codes() == "nesting_too_deep"
    assert conduit_api.json_refusal(json.loads("[" * 32 + "]" * 32)) is None
    assert conduit_api.json_refusal({"a": [{"b": deep}]}).get_codes() == "nesting_too_deep"


def test_deep_but_parsable_body_is_a_400(api):
    assert_json_error(post_raw(api, '{"decision": ' + "[" * 500 + "]" * 500 + "}"), 400, "nesting_too_deep")


@pytest.mark.parametrize(
    "body",
    [
        # The enum violation's message quoted the value, and the renderer could not encode it: a 500.
        '{"decision": "replay", "proposal": {"operation": "\\ud800", "key": "k", "digest": "d"}}',
        '{"decision": "replay", "proposal": {"operation": "apply", "key": "k", "digest": "d", "\\udfff": 1}}',
        '{"decision": "\\udc00x"}',
        '["ok", ["\\ud83d"]]',
    ],
)
def test_a_lone_surrogate_is_refused_at_input(api, body):
    assert_json_error(post_raw(api, body), 400, "invalid_unicode")


def test_a_paired_surrogate_escape_is_ordinary_text(api):
    body = (
        '{"decision": "replay", "proposal": {"operation": "apply", "key": "\\ud83d\\ude00", "digest": "d"}}'
    )
    assert post_raw(api, body).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        '{"decision": 1e400}',
        '{"decision": -1e400}',
        '{"decision": 0.1e99999}',
        '{"decision": NaN}',
        '{"decision": Infinity}',
        '{"decision": 1' + "0" * 5000 + "}",
        b'{"decision": "\xff"}',
        "\ufeff{}",
        "{not json",
    ],
)
def test_numbers_beyond_a_double_and_other_non_json_are_parse_errors(api, body):
    assert_json_error(post_raw(api, body), 400, "parse_error")


def test_a_body_over_the_upload_limit_is_a_json_413(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    assert_json_error(post_raw(api, json.dumps({"decision": "x" * 2000})), 413, "payload_too_large")


def test_a_form_body_is_a_415(api):
    assert_json_error(
        post_raw(api, "a=1", "application/x-www-form-urlencoded"), 415, "unsupported_media_type"
    )


# Paths, methods and content negotiation.


@pytest.mark.parametrize("debug", [False, True])
def test_an_unknown_api_path_is_a_json_404_for_every_method(api, settings, debug):
    settings.DEBUG = debug
    for method in ("get", "post", "put", "delete"):
        assert_json_error(getattr(api, method)("/api/nope/"), 404, "not_found")
    assert_json_error(api.get("/api/events"), 404, "not_found")
    assert_json_error(api.get("/api/"), 404, "not_found")


def test_an_unknown_api_path_is_a_404_without_a_token_and_without_csrf(client):
    assert_json_error(client.post("/api/nope/", "{}", content_type="application/json"), 404, "not_found")


def test_an_unknown_format_is_a_404_with_its_code(api):
    assert_json_error(api.get("/api/events/", {"format": "xml"}), 404, "not_found")


def test_a_wrong_method_and_an_unacceptable_type_are_json(api):
    assert_json_error(
        api.put("/api/decisions/", "{}", content_type="application/json"), 405, "method_not_allowed"
    )
    assert_json_error(api.delete("/api/events/"), 405, "method_not_allowed")
    assert_json_error(api.get("/api/events/", HTTP_ACCEPT="text/html"), 406, "not_acceptable")


def _boom(request):
    raise RuntimeError("a planted bug")


urlpatterns = [path("api/boom/", _boom), path("elsewhere/boom/", _boom)]
handler500 = "conduit.api.handler500"


@override_settings(ROOT_URLCONF=__name__)
def test_an_unexpected_error_under_api_is_a_json_500_and_the_admin_keeps_html(api):
    assert_json_error(api.get("/api/boom/"), 500, "server_error")
    elsewhere = api.get("/elsewhere/boom/")
    assert elsewhere.status_code == 500 and elsewhere["Content-Type"].startswith("text/html")


def test_errors_raised_outside_a_view_answer_json_under_api_and_html_elsewhere():
    factory = RequestFactory()
    too_big = conduit_api.handler400(factory.post("/api/decisions/"), RequestDataTooBig("over"))
    assert too_big.status_code == 413 and json.loads(too_big.content)["code"] == "payload_too_large"
    assert json.loads(conduit_api.handler400(factory.get("/api/x/"), None).content)["code"] == "bad_request"
    assert (
        json.loads(conduit_api.handler403(factory.get("/api/x/"), None).content)["code"]
        == "permission_denied"
    )
    assert json.loads(conduit_api.handler404(factory.get("/api/x/"), None).content)["code"] == "not_found"
    assert json.loads(conduit_api.handler500(factory.get("/api/x/")).content)["code"] == "server_error"
    for response in (
        conduit_api.handler400(factory.get("/admin/"), None),
        conduit_api.handler404(factory.get("/admin/x/"), None),
    ):
        assert response["Content-Type"].startswith("text/html")


def test_the_admin_keeps_its_html_404(admin_client):
    response = admin_client.get("/admin/ingress/nope/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


def test_root_urlconf_names_the_json_handlers():
    from conduit import urls

    assert (urls.handler400, urls.handler403, urls.handler404, urls.handler500) == (
        "conduit.api.handler400",
        "conduit.api.handler403",
        "conduit.api.handler404",
        "conduit.api.handler500",
    )
