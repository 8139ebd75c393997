"""The review and unknown-send queues through the Django test client, with and without permissions."""

import re

import pytest
from django.contrib.auth.models import Group, User

from replies.models import ReplyAction, ReplyCopy, ReplyTransition
from replies.sender import reply_send
from replies.services import reply_approve
from tests.conftest import fail_next


def member(username: str, *groups: str) -> User:
    user = User.objects.create_user(username, password="unused-test-password", is_staff=True)
    for name in groups:
        user.groups.add(Group.objects.get(name=name))
    return user


PIN = re.compile(r'name="(pin_[0-9]+)" value="([^"]*)"')


def act(client, queue: str, action: str, rows, **extra):
    """Post an admin action; a confirmation is posted as a browser does, with what the confirmation
    page carried (the copy version it showed)."""
    form = {"action": action, "_selected_action": [r.pk for r in rows]}
    if extra.get("confirm") == "yes":
        shown = client.post(f"/admin/replies/{queue}/", form)
        form.update(PIN.findall(shown.content.decode()) if shown.status_code == 200 else [])
    return client.post(f"/admin/replies/{queue}/", {**form, **extra}, follow=True)


@pytest.fixture
def pending(provider, wire, planned):
    state = provider()
    wire(state)
    return planned(), state


def test_queues_and_pages_render_with_history_and_attempts(admin_client, pending):
    (action, other), _ = pending
    reply_approve(action_id=action.pk, actor="reviewer_test")
    reply_send(action_id=action.pk)
    for url in (
        "/admin/replies/reviewqueue/",
        "/admin/replies/unknownsendqueue/",
        "/admin/replies/replyaction/",
        f"/admin/replies/replyaction/{action.pk}/change/",
        f"/admin/replies/reviewqueue/{other.pk}/change/",
        "/admin/replies/replycopy/",
        "/admin/replies/replycopy/add/",
        "/admin/replies/sendattempt/",
        "/admin/replies/canarysinkrecord/",
        f"/admin/replies/replyaction/?q={action.reply_key}",
        "/admin/replies/reviewqueue/?purpose=private_delivery",
    ):
        assert admin_client.get(url).status_code == 200, url
    page = admin_client.get(f"/admin/replies/replyaction/{action.pk}/change/").content.decode()
    assert "receipt_stored" in page and "Response Received" in page and "post_test_07" in page
    queue = admin_client.get("/admin/replies/reviewqueue/").content.decode()
    assert other.reply_key[:12] in queue and action.reply_key[:12] not in queue


def test_reviewer_approves_after_confirmation_and_the_actor_is_recorded(client, pending):
    (action, _), _ = pending
    client.force_login(member("reviewer_test", "reviewers"))
    page = act(client, "reviewqueue", "approve", [action])
    assert b"Confirm" in page.content
    action.refresh_from_db()
    assert action.delivery_state == "REVIEW_PENDING"
    act(client, "reviewqueue", "approve", [action], confirm="yes")
    action.refresh_from_db()
    assert (action.delivery_state, action.approved_by) == ("APPROVED", "reviewer_test")
    last = ReplyTransition.objects.filter(action=action).last()
    assert (last.actor, last.reason_code) == ("reviewer_test", "approved_by_reviewer")


def test_without_the_permission_nothing_is_approved(client, pending):
    (action, _), _ = pending
    client.force_login(member("operator_test", "operators"))
    assert client.get("/admin/replies/reviewqueue/").status_code == 403
    act(client, "reviewqueue", "approve", [action], confirm="yes")
    action.refresh_from_db()
    assert action.delivery_state == "REVIEW_PENDING"


def test_approving_without_copy_shows_what_is_missing(client, pending):
    (action, _), _ = pending
    ReplyCopy.objects.all().delete()
    client.force_login(member("reviewer_test", "reviewers"))
    page = act(client, "reviewqueue", "approve", [action], confirm="yes")
    assert b"no approved copy for purpose" in page.content
    action.refresh_from_db()
    assert action.delivery_state == "REVIEW_PENDING"


def test_operator_resolves_unknown_sends_and_a_reviewer_cannot(client, pending):
    (action, _), state = pending
    reply_approve(action_id=action.pk, actor="reviewer_test")
    fail_next(state, "error_after_accept")
    assert reply_send(action_id=action.pk) == "SEND_STATUS_UNKNOWN"

    client.force_login(member("reviewer_test", "reviewers"))
    act(client, "unknownsendqueue", "confirm_sent", [action], confirm="yes", note="rcpt_test_x")
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN"

    client.force_login(member("operator_test", "operators"))
    page = act(client, "unknownsendqueue", "confirm_sent", [action], confirm="yes")
    assert b"Provider receipt id is required" in page.content
    act(client, "unknownsendqueue", "authorize_retry", [action], confirm="yes")
    action.refresh_from_db()
    # The provider applied it before answering 503: the lookup finds the receipt; nothing resends.
    assert action.delivery_state == "SENT" and action.provider_reply_id == state.receipts[action.reply_key]


def test_a_retry_the_recovery_table_forbids_is_refused_as_a_message(client, provider, wire, planned):
    state = provider(idempotency_key=False, receipt_lookup=False)
    wire(state)
    action, _ = planned()
    reply_approve(action_id=action.pk, actor="reviewer_test")
    fail_next(state, "drop_after_accept")
    assert reply_send(action_id=action.pk) == "SEND_STATUS_UNKNOWN"
    client.force_login(member("operator_test", "operators"))
    response = act(client, "unknownsendqueue", "authorize_retry", [action], confirm="yes")
    assert response.status_code == 200
    assert b"no receipt lookup" in response.content
    action.refresh_from_db()
    assert action.delivery_state == "SEND_STATUS_UNKNOWN"


def test_copy_is_versioned_and_only_declared_purposes_get_copy(admin_client, pending, sandbox_source):
    response = admin_client.post(
        "/admin/replies/replycopy/add/",
        {
            "source": sandbox_source.pk,
            "purpose": "public_ack",
            "channel": "public_ack",
            "text": "New text.",
        },
    )
    assert response.status_code == 302
    versions = list(ReplyCopy.objects.filter(purpose="public_ack").values_list("copy_version", "text"))
    assert versions == [("v2", "New text."), ("v1", "The sample checklist is ready in the test fixture.")]
    response = admin_client.post(
        "/admin/replies/replycopy/add/",
        {
            "source": sandbox_source.pk,
            "purpose": "nope",
            "channel": "x",
            "text": "y",
        },
    )
    assert response.status_code == 200 and b"not a declared purpose" in response.content


def test_only_owners_may_enable_live_sending_on_a_route(client, sandbox_source, live_ready):
    """The owner-only live flag moved from the source to its reply routes; the rule did not change."""
    from django.contrib.auth.models import Permission

    from replies.models import ReplyRoute

    route = ReplyRoute.objects.get(source=sandbox_source, purpose="public_ack")
    form = {"transport_name": "sandbox", "target_url": "http://127.0.0.1:9", "live_send_enabled": "on"}
    editor = member("editor_test")
    editor.user_permissions.add(
        *Permission.objects.filter(codename__in=["change_replyroute", "view_replyroute"])
    )
    client.force_login(editor)
    url = f"/admin/replies/replyroute/{route.pk}/change/"
    assert b'name="live_send_enabled"' not in client.get(url).content
    assert client.post(url, form).status_code == 302  # the edit saves...
    route.refresh_from_db()
    assert (route.target_url, route.live_send_enabled) == ("http://127.0.0.1:9", False)  # ...not the flag

    client.force_login(member("owner_test", "owners"))
    assert b'name="live_send_enabled"' in client.get(url).content
    assert client.post(url, form).status_code == 302
    route.refresh_from_db()
    assert route.live_send_enabled is True
    other = ReplyRoute.objects.get(source=sandbox_source, purpose="private_delivery")
    assert other.live_send_enabled is False  # one route's flag, not the source's


def test_owners_add_a_route_only_for_a_declared_purpose(client, sandbox_source):
    from replies.models import ReplyRoute

    ReplyRoute.objects.filter(purpose="private_delivery").delete()
    client.force_login(member("owner_test", "owners"))
    add = "/admin/replies/replyroute/add/"
    form = {"source": sandbox_source.pk, "transport_name": "sandbox", "target_url": "http://127.0.0.1:9"}
    response = client.post(add, {**form, "purpose": "nope"})
    assert response.status_code == 200 and b"not a declared purpose" in response.content
    assert client.post(add, {**form, "purpose": "private_delivery"}).status_code == 302
    route = ReplyRoute.objects.get(purpose="private_delivery")
    assert (route.transport_name, route.target_url, route.live_send_enabled) == (
        "sandbox",
        "http://127.0.0.1:9",
        False,
    )


@pytest.mark.parametrize(
    "queue, group, chosen, reason",
    [
        # A reviewer says why (the confirmation's choice); an operator's close is its queue's.
        ("reviewqueue", "reviewers", {"note": "closed_not_a_buyer"}, "closed_not_a_buyer"),
        ("reviewqueue", "reviewers", {"note": "closed_by_reviewer"}, "closed_by_reviewer"),
        ("unknownsendqueue", "operators", {}, "closed_by_operator"),
    ],
)
def test_each_queue_closes_with_its_own_reason(client, pending, queue, group, chosen, reason):
    (action, _), _ = pending
    if queue == "unknownsendqueue":
        ReplyAction.objects.filter(pk=action.pk).update(delivery_state="SEND_STATUS_UNKNOWN")
    client.force_login(member(f"{group}_test", group))
    act(client, queue, "close", [action], confirm="yes", **chosen)
    action.refresh_from_db()
    assert action.delivery_state == "CLOSED_NO_REPLY"
    last = ReplyTransition.objects.filter(action=action).last()
    assert (last.actor, last.reason_code) == (f"{group}_test", reason)
