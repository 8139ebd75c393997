"""The read API's door is the admin's: a session obeys the same second factor and the same model
permissions as the admin, a token acts with its user's permissions.

The hole this closes: with CONDUIT_ADMIN_2FA=required, a staff session signed in with a password
only was refused by the admin but read /api/events/ and /api/quarantine/; a staff user in no group
read the whole event ledger.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from tests.conftest import fixture_body
from tests.doors.conftest import make_user, sign_in

pytestmark = pytest.mark.usefixtures("sandbox_source")

READS = ("/api/events/", "/api/quarantine/")
DECISION = {"question": "replay@1"}  # refused by the schema (400) once the door lets it in


@pytest.fixture(autouse=True)
def _rows(sandbox_source, deliver):
    deliver(fixture_body("comment__northstar"))
    deliver(fixture_body("comment__missing_post_id"))


def _codes(client) -> dict[str, tuple[int, str]]:
    answers = {}
    for url in READS:
        response = client.get(url)
        answers[url] = (response.status_code, response.json().get("code", ""))
    response = client.post("/api/decisions/", DECISION, content_type="application/json")
    answers["/api/decisions/"] = (response.status_code, response.json().get("code", ""))
    return answers


@pytest.mark.parametrize("role", ["reviewer", "superuser"])
def test_second_factor_required_a_password_only_session_reads_nothing(client, settings, role):
    settings.CONDUIT_ADMIN_2FA = "required"
    user = make_user(role)
    sign_in(client, user, verified=False)
    assert client.get("/admin/")["Location"].startswith("/admin/login/")  # the admin refuses it
    assert set(_codes(client).values()) == {(403, "second_factor_required")}


def test_second_factor_required_a_verified_session_reads(client, settings):
    settings.CONDUIT_ADMIN_2FA = "required"
    sign_in(client, make_user("reviewer"), verified=True)
    assert client.get("/admin/").status_code == 200
    answers = _codes(client)
    assert answers["/api/events/"] == answers["/api/quarantine/"] == (200, "")
    assert answers["/api/decisions/"] == (400, "invalid_request")


def test_control_second_factor_off_the_password_only_session_reads(client, settings):
    settings.CONDUIT_ADMIN_2FA = "off"
    sign_in(client, make_user("reviewer"), verified=False)
    assert _codes(client)["/api/events/"] == (200, "")


def test_a_staff_user_in_no_group_reads_no_ledger(client):
    sign_in(client, make_user("staff_no_group"), verified=False)
    assert client.get("/admin/ingress/inboundevent/").status_code == 403  # as in the admin
    answers = _codes(client)
    assert answers["/api/events/"] == answers["/api/quarantine/"] == (403, "permission_denied")
    assert "ingress.view_inboundevent" in client.get("/api/events/").json()["detail"]
    # A decision reads no ledger: any admitted session may ask one.
    assert answers["/api/decisions/"] == (400, "invalid_request")


def test_each_role_reads_what_its_admin_pages_show(client):
    # Operators see events, not quarantine; owners neither.
    expected = {"reviewer": (200, 200), "operator": (200, 403), "owner": (403, 403), "superuser": (200, 200)}
    for role, (events, quarantine) in expected.items():
        sign_in(client, make_user(role), verified=False)
        assert client.get("/api/events/").status_code == events, role
        assert client.get("/admin/ingress/inboundevent/").status_code == events, role
        assert client.get("/api/quarantine/").status_code == quarantine, role
        assert client.get("/admin/ingress/quarantinereceipt/").status_code == quarantine, role


def test_a_session_of_a_user_who_is_not_staff_is_refused(client):
    user = User.objects.create_user("not_staff_test", password="unused-test-password")
    user.user_permissions.add(*Permission.objects.filter(codename="view_inboundevent"))
    client.force_login(user)
    assert client.get("/api/events/").json()["code"] == "not_staff"


def _token_client(*codenames: str) -> APIClient:
    user = User.objects.create_user(f"token_{len(codenames)}_test")
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="ingress", codename__in=codenames)
    )
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_a_token_acts_with_its_users_permissions(settings):
    settings.CONDUIT_ADMIN_2FA = "required"  # a token is its own credential: no second factor
    bare = _token_client()
    assert bare.get("/api/events/").status_code == 403
    assert bare.get("/api/quarantine/").status_code == 403
    events_only = _token_client("view_inboundevent")
    assert events_only.get("/api/events/").status_code == 200
    assert events_only.get("/api/quarantine/").json()["code"] == "permission_denied"


def test_a_token_of_an_inactive_user_is_refused():
    client = _token_client("view_inboundevent")
    User.objects.filter(username="token_1_test").update(is_active=False)
    assert client.get("/api/events/").status_code == 401


def test_anonymous_is_asked_to_authenticate(client):
    assert set(_codes(client).values()) == {(401, "not_authenticated")}
