"""POST /api/decisions/: authentication, every violation with its pointer, and never a 500."""

import json

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from tests.conftest import FIXTURES

pytestmark = pytest.mark.django_db


def load(name: str) -> dict:
    return json.loads((FIXTURES / "decisions" / f"{name}.json").read_text())


def test_the_worked_example_through_the_api_with_the_role_from_settings(api, settings):
    settings.CONDUIT_DECISION_ROLE = "Inventory Controller"
    settings.CONDUIT_EVIDENCE_MODEL = None
    for name in ("deliver__journal_already_exists", "apply__same_key_different_content"):
        response = api.post("/api/decisions/", load(f"{name}.request"), format="json")
        assert response.status_code == 200
        assert response.json() == load(f"{name}.response")


def test_the_evidence_model_is_chosen_in_settings(api, settings):
    settings.CONDUIT_EVIDENCE_MODEL = "http-semantics"
    response = api.post("/api/decisions/", load("deliver__journal_already_exists.request"), format="json")
    assert response.json()["verdict"] == "applied"


def test_authentication_token_or_staff_session(client):
    body = load("apply__same_key_different_content.request")
    assert client.post("/api/decisions/", body, content_type="application/json").status_code == 401
    user = User.objects.create_user("plain_test", password="unused-test-password")
    client.force_login(user)
    assert client.post("/api/decisions/", body, content_type="application/json").status_code == 403
    user.is_staff = True
    user.save()
    assert client.post("/api/decisions/", body, content_type="application/json").status_code == 200


def test_every_violation_is_listed_with_its_pointer(api):
    body = {
        "decision": "replay",
        "surprise": 1,
        "proposal": {"operation": "resend", "key": "", "digest": "d", "delta": "1.2.3"},
        "attempts": [{"transport": "sent", "at": "yesterday", "http_status": 99}]
        + [{"transport": "sent"}] * 50,
        "events": [{"key": "k", "digest": "d", "kind": "refund"}],
    }
    response = api.post("/api/decisions/", body, format="json")
    assert response.status_code == 400
    payload = response.json()
    assert payload["code"] == "invalid_request"
    pointers = {(v["pointer"], v["keyword"]) for v in payload["violations"]}
    assert pointers == {
        ("", "additionalProperties"),
        ("/proposal/operation", "enum"),
        ("/proposal/key", "minLength"),
        ("/proposal/delta", "format"),
        ("/attempts", "maxItems"),
        ("/attempts/0/at", "format"),
        ("/attempts/0/http_status", "minimum"),
        ("/events/0", "required"),
        ("/events/0/kind", "enum"),
    }


def test_the_openapi_description_is_served_and_carries_the_request_schema():
    from reconcile.decisions.schema import REQUEST_SCHEMA

    document = APIClient().get("/api/schema/").json()
    assert document["openapi"].startswith("3.1")
    assert document["components"]["schemas"]["DecisionRequest"] == REQUEST_SCHEMA
    assert "post" in document["paths"]["/api/decisions/"]


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
_almost = st.fixed_dictionaries(
    {
        "decision": st.sampled_from(["replay", "other"]),
        "proposal": st.fixed_dictionaries(
            {
                "operation": st.sampled_from(["apply", "deliver", "x"]),
                "key": st.text(max_size=5),
                "digest": st.text(max_size=5),
            },
            optional={"kind": _json, "delta": _json},
        ),
    },
    optional={"events": _json, "destination": _json, "attempts": _json, "extra": _json},
)


@hsettings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(_json, _almost))
def test_no_input_yields_a_server_error(api, body):
    response = api.post("/api/decisions/", json.dumps(body), content_type="application/json")
    assert response.status_code in (200, 400), response.content[:300]


def test_a_body_that_is_not_json_is_a_400(api):
    response = api.post("/api/decisions/", "{not json", content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "parse_error"
