"""The ingress admin: read-only ledgers, quarantine review with permission and confirmation."""

import pytest
from django.contrib.auth.models import Permission, User

from ingress.models import InboundEvent, QuarantineReceipt, Source
from tests.conftest import SECRET_ENV, fixture_body

pytestmark = pytest.mark.usefixtures("sandbox_source")


def staff(username: str, *perms: str) -> User:
    user = User.objects.create_user(username, password="unused-test-password", is_staff=True)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


@pytest.fixture
def receipt(deliver):
    deliver(fixture_body("comment__missing_post_id"))
    return QuarantineReceipt.objects.get()


def test_every_ledger_page_renders_and_ledgers_are_read_only(admin_client, deliver, receipt):
    deliver(fixture_body("comment__northstar"))
    event = InboundEvent.objects.get()
    for url in (
        "/admin/",
        "/admin/ingress/source/",
        "/admin/ingress/inboundevent/",
        f"/admin/ingress/inboundevent/{event.pk}/change/",
        "/admin/ingress/delivery/",
        "/admin/ingress/quarantinereceipt/",
        f"/admin/ingress/quarantinereceipt/{receipt.pk}/change/",
        "/admin/replies/replyaction/",
        "/admin/ingress/inboundevent/?event_state__exact=RECORD_READY",
        f"/admin/ingress/inboundevent/?q={event.event_key}",
    ):
        response = admin_client.get(url)
        assert response.status_code == 200, url
    page = admin_client.get(f"/admin/ingress/inboundevent/{event.pk}/change/").content.decode()
    assert "Replies planned" in page and "public_ack" in page
    # The buyer's words lead the event's page for staff with the content permission (a superuser
    # here); tests/doors/test_content_lookups.py holds them from everyone else.
    assert page.index("They wrote") < page.index("Details") and "CHECKLIST" in page
    assert "CHECKLIST" not in admin_client.get("/admin/ingress/inboundevent/").content.decode()
    assert admin_client.get("/admin/ingress/inboundevent/add/").status_code == 403
    assert admin_client.post(f"/admin/ingress/inboundevent/{event.pk}/delete/").status_code == 403


def _act(client, action, receipt, **extra):
    return client.post(
        "/admin/ingress/quarantinereceipt/",
        {"action": action, "_selected_action": [receipt.pk], **extra},
        follow=True,
    )


def test_review_needs_the_permission(client, receipt):
    client.force_login(staff("viewer_test", "view_quarantinereceipt"))
    response = _act(client, "dismiss", receipt, confirm="yes")
    assert response.status_code == 200
    receipt.refresh_from_db()
    assert receipt.state == "QUARANTINED"


def test_dismiss_asks_for_confirmation_then_records_the_reviewer(client, receipt):
    client.force_login(staff("reviewer_test", "view_quarantinereceipt", "review_quarantinereceipt"))
    page = _act(client, "dismiss", receipt)
    assert b"Confirm" in page.content
    receipt.refresh_from_db()
    assert receipt.state == "QUARANTINED"
    _act(client, "dismiss", receipt, confirm="yes", note="synthetic noise")
    receipt.refresh_from_db()
    assert (receipt.state, receipt.reviewed_by, receipt.review_note) == (
        "DISMISSED",
        "reviewer_test",
        "synthetic noise",
    )


def test_corrected_needs_a_note_and_a_second_review_is_refused_as_a_message(client, receipt):
    client.force_login(staff("reviewer_test", "view_quarantinereceipt", "review_quarantinereceipt"))
    page = _act(client, "mark_corrected", receipt, confirm="yes")
    assert b"Review note is required" in page.content
    _act(client, "mark_corrected", receipt, confirm="yes", note="field map fixed")
    response = _act(client, "dismiss", receipt, confirm="yes")
    assert response.status_code == 200
    assert b"not in the declared transition table" in response.content
    receipt.refresh_from_db()
    assert receipt.state == "CORRECTED"


def _source_form(**overrides):
    data = {
        "name": "sandbox",
        "adapter": "sandbox-social",
        "account_ref": "acct_test_01",
        "event_types": "comment.created",
        "contract_version": "event-v1",
        "purposes": "public_ack, private_delivery",
        "retention_days": 30,
        "secret_env": SECRET_ENV,
        "source_url": "",
    }
    return {**data, **overrides}


@pytest.mark.parametrize(
    "field, value",
    [
        ("account_ref", "acct_test_02"),
        ("canary", "on"),
        ("contract_version", "event-v2"),
        ("adapter", "sandbox-social-x"),
    ],
)
def test_admin_shows_identity_and_canary_read_only_after_registration(
    admin_client, sandbox_source, field, value
):
    """docs/platforms/sources.md#immutable: "Registrations are immutable for one runtime instance."
    A canary flag switched
    on in the admin would silently suppress a live source's approved replies."""
    url = f"/admin/ingress/source/{sandbox_source.pk}/change/"
    page = admin_client.get(url)
    assert f'name="{field}"'.encode() not in page.content  # shown, not editable
    response = admin_client.post(url, _source_form(**{field: value}, retention_days=31))
    assert response.status_code == 302
    source = Source.objects.get()
    assert (source.account_ref, source.canary, source.contract_version, source.adapter) == (
        "acct_test_01",
        False,
        "event-v1",
        "sandbox-social",
    )
    assert source.retention_days == 31  # the rest of the form was saved


@pytest.mark.parametrize(
    "changes",
    [
        {"canary": True},
        {"account_ref": "acct_test_02"},
        {"contract_version": "event-v2"},
    ],
)
def test_source_update_refuses_to_move_what_registration_fixed(sandbox_source, changes):
    """docs/platforms/sources.md#immutable: registrations are immutable; the service refuses and explains, with no events yet."""
    from ingress.services import SourceConflict, source_update

    with pytest.raises(SourceConflict, match="cannot change after registration"):
        source_update(source_id=sandbox_source.pk, changes=changes)
    assert Source.objects.get().canary is False


def test_registration_refuses_names_longer_than_their_columns(db):
    """Registration refuses a 65-character event type or purpose, which would otherwise be accepted
    and then answer every webhook for it 503 store_unavailable."""
    from django.core.exceptions import ValidationError

    from ingress.services import source_register

    for field in ("event_types", "purposes"):
        values = {"event_types": ["comment.created"], "purposes": ["public_ack"], field: ["x" * 65]}
        with pytest.raises(ValidationError, match="at most 64 characters"):
            source_register(
                name=f"long-{field}",
                adapter="sandbox-social",
                account_ref=f"acct_test_{field}",
                trigger_keywords=[],
                secret_env=SECRET_ENV,
                **values,
            )
    assert not Source.objects.filter(name__startswith="long-").exists()


def test_admin_adds_a_source_and_refuses_a_duplicate_account(admin_client, sandbox_source):
    response = admin_client.post(
        "/admin/ingress/source/add/", _source_form(name="second", account_ref="acct_test_02")
    )
    assert response.status_code == 302
    assert Source.objects.get(name="second").source_system == "sandbox-social"
    response = admin_client.post("/admin/ingress/source/add/", _source_form(name="third"))
    assert response.status_code == 200
    assert b"already registered as sandbox" in response.content
    response = admin_client.post(
        "/admin/ingress/source/add/",
        _source_form(name="fourth", account_ref="acct_test_04", secret_env="whsec_x"),
    )
    assert b"NAME of an environment variable" in response.content
