"""The console a reviewer opens each morning (docs/admin.md), through the test client."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from replies.services import reply_approve, reply_close


def staff(username: str, *groups: str, content: bool = False) -> User:
    user = User.objects.create_user(username, password="unused-test-password", is_staff=True)
    for name in groups:
        user.groups.add(Group.objects.get(name=name))
    if content:
        user.user_permissions.add(Permission.objects.get(codename="view_message_content"))
    return user


@pytest.fixture
def pending(provider, wire, planned):
    wire(provider())
    return planned()


def test_the_front_page_counts_what_waits_and_links_each_queue(admin_client, pending):
    page = admin_client.get("/admin/").content.decode()
    assert "Conduit back office" in page and "What needs a person" in page
    assert 'id="work-review_pending"' in page and 'href="/admin/replies/reviewqueue/"' in page
    assert "/admin/reconcile/finding/?queue=unexpected_receipts" in page
    assert (
        "/admin/reconcile/scanstate/?failing=yes" in page and "/admin/ingress/source/?attention=yes" in page
    )
    row = page.split('id="work-review_pending"')[1].split("</tr>")[0]
    assert '<td class="count">2</td>' in row and "ago" in row
    assert "View site" not in page


def test_the_front_page_reads_a_bounded_number_of_queries(
    admin_client, pending, django_assert_max_num_queries
):
    # Two reads per queue plus the session, user and app list: no per-row reads.
    with django_assert_max_num_queries(25):
        admin_client.get("/admin/")


def test_task_and_token_tables_are_for_superusers_only(client, admin_client, pending):
    user = staff("operator_test", "operators")
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label__in=["django_q", "authtoken"])
    )
    client.force_login(user)
    page = client.get("/admin/").content.decode()
    assert "Successful tasks" not in page and "Tokens" not in page
    assert client.get("/admin/django_q/success/").status_code == 403
    # A superuser finds them, with the other tools' pages, in one "Administration" group, last.
    front = admin_client.get("/admin/").content.decode()
    group = front[front.index(">Administration<") :]
    assert "Successful tasks" in group and "Tokens" in group and "Access attempts" in group
    assert "Django Q" not in front and ">Axes<" not in front


def test_the_review_queue_shows_comment_and_copy_only_to_staff_allowed_content(client, pending):
    action, _ = pending
    comment = action.event.message_text
    client.force_login(staff("reviewer_test", "reviewers"))
    page = client.get("/admin/replies/reviewqueue/").content.decode()
    assert comment not in page
    assert "The sample checklist is ready in the test fixture." in page  # the copy
    assert f"{action.reply_key[:12]}…" in page  # shortened from the right
    client.force_login(staff("reader_test", "reviewers", content=True))
    assert comment in client.get("/admin/replies/reviewqueue/").content.decode()


def test_the_detail_page_has_buttons_and_the_confirmation_shows_the_text(client, pending):
    action, _ = pending
    client.force_login(staff("reviewer_test", "reviewers"))
    page = client.get(f"/admin/replies/reviewqueue/{action.pk}/change/").content.decode()
    assert 'value="approve"' in page and 'value="close"' in page
    confirm = client.post(
        "/admin/replies/reviewqueue/", {"action": "approve", "index": 0, "_selected_action": [action.pk]}
    ).content.decode()
    assert (
        "<strong>Will send as public_ack (copy v1):</strong><div>The sample checklist is ready in the test fixture.</div>"
        in confirm
    )


def test_approved_and_closed_replies_stay_findable(admin_client, pending):
    approved, closed = pending
    assert reply_approve(action_id=approved.pk, actor="reviewer_test").ok
    assert reply_close(action_id=closed.pk, actor="closer_test").ok
    page = admin_client.get("/admin/replies/replyaction/?decided=yes").content.decode()
    assert "approved by reviewer_test" in page and "closed by closer_test" in page
