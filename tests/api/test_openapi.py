"""The served OpenAPI description covers the read API, and real answers conform to it."""

import pytest
from jsonschema import Draft202012Validator
from rest_framework.test import APIClient

from tests.conftest import fixture_body

pytestmark = pytest.mark.django_db


def served() -> dict:
    return APIClient().get("/api/schema/").json()


def conforms(document: dict, name: str, instance) -> None:
    schema = {**document["components"]["schemas"][name], "components": document["components"]}
    # The components are reachable from the instance schema as #/components/...
    Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER).validate(instance)


def test_the_read_api_is_described_with_every_parameter():
    paths = served()["paths"]
    params = {
        path: {p["name"] for p in paths[path]["get"]["parameters"]}
        for path in ("/api/events/", "/api/quarantine/")
    }
    assert params == {
        "/api/events/": {"event_key", "source", "state", "cursor", "page_size"},
        "/api/quarantine/": {"source", "state", "cursor", "page_size"},
    }
    for path in ("/api/events/", "/api/quarantine/", "/api/decisions/"):
        for operation in paths[path].values():
            assert {"400", "401"} <= set(operation["responses"])


def test_real_pages_and_errors_conform(api, sandbox_source, deliver):
    document = served()
    deliver(fixture_body("comment__northstar"))
    deliver(fixture_body("comment__missing_post_id"))
    conforms(document, "EventPage", api.get("/api/events/").json())
    conforms(document, "QuarantinePage", api.get("/api/quarantine/").json())
    conforms(document, "Error", api.get("/api/events/", {"state": "NOPE"}).json())
    conforms(document, "Error", api.get("/api/events/", {"cursor": "x"}).json())
    conforms(document, "Error", APIClient().get("/api/events/").json())


def test_control_a_page_with_an_undescribed_field_does_not_conform(api, sandbox_source, deliver):
    deliver(fixture_body("comment__northstar"))
    page = api.get("/api/events/").json()
    page["results"][0]["text"] = "leaked"
    with pytest.raises(Exception):
        conforms(served(), "EventPage", page)
