"""The reviewer's inbox (replies/admin/inbox.py): one card per comment, decided by its buttons.

The browser tour (tests/browser/test_inbox_tour.py) drives the same page by keyboard; these
tests hold what each button does to the ledger.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from conduit.content import MESSAGE_CONTENT
from conduit.providers.reading import PostSummary
from replies.models import ReplyAction, ReplyTransition
from replies.services.posts import posts_remember
from tests.conftest import COPY

INBOX = "/admin/replies/reviewqueue/inbox/"
NOW = datetime.now(timezone.utc).replace(microsecond=0)


def _body(
    n: int, *, text: str = "CHECKLIST please", handle: str = "buyer_test", post: str = "post_test_07"
) -> bytes:
    return json.dumps(
        {
            "account": "acct_test_01",
            "events": [
                {
                    "id": f"evt_test_inbox{n}",
                    "type": "comment.created",
                    "post_id": post,
                    "comment_id": f"msg_test_inbox{n}",
                    "from_id": "person_test_inbox",
                    "from_handle": handle,
                    "created_at": (NOW - timedelta(minutes=30 - n)).isoformat(timespec="seconds"),
                    "text": text,
                }
            ],
        }
    ).encode()


@pytest.fixture
def inbox(wire, deliver):
    """Three comments by one person on one post, each with two replies waiting (public, private)."""
    wire()
    for n, text in enumerate(("CHECKLIST first", "CHECKLIST second", "CHECKLIST third")):
        assert deliver(_body(n, text=text)).status_code == 200
    return list(ReplyAction.objects.order_by("event__occurred_at", "purpose"))


def _reviewer(name: str = "reviewer_test", *, content: bool = True) -> User:
    user = User.objects.create_user(name, password="unused-test-password", is_staff=True)
    codenames = ["view_reviewqueue", "approve_replyaction"]
    if content:
        codenames.append(MESSAGE_CONTENT.split(".")[1])
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return user


def _text(response) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", response.content.decode()))


def test_one_card_per_comment_oldest_first_with_the_words_and_every_text(client, inbox):
    # A platform with a private-reply window (Meta's 7 days) sets each private reply's deadline.
    ReplyAction.objects.filter(purpose="private_delivery").update(reply_deadline=NOW + timedelta(days=2))
    client.force_login(_reviewer())
    page = client.get(INBOX)
    assert page.status_code == 200
    cards = page.context["cards"]
    assert [c.event.message_text for c in cards] == ["CHECKLIST first", "CHECKLIST second", "CHECKLIST third"]
    assert [len(c.actions) for c in cards] == [2, 2, 2]
    text = _text(page)
    assert "buyer_test wrote:" in text and text.count(COPY) == 6
    # The person's earlier comments on the post, on the later cards.
    assert [[e.message_text for e in c.earlier] for c in cards] == [
        [],
        ["CHECKLIST first"],
        ["CHECKLIST second", "CHECKLIST first"],
    ]
    assert "Campaign: sandbox: every post" in text and "left to reply privately" in text


def test_without_the_content_permission_the_words_are_not_shown(client, inbox):
    client.force_login(_reviewer("plain_reviewer_test", content=False))
    text = _text(client.get(INBOX))
    assert "CHECKLIST first" not in text and "buyer_test" not in text
    assert "shown only to reviewers with the content permission" in text


def test_approve_all_confirms_the_comment_beside_every_text_then_approves_both(client, inbox):
    client.force_login(_reviewer())
    card = client.get(INBOX).context["cards"][0]
    confirm = client.post(INBOX, {"action": "approve", "card": card.event.pk})
    assert confirm.status_code == 200  # the confirmation page, nothing approved yet
    said = _text(confirm)
    assert said.count("buyer_test wrote:") == 2 and "CHECKLIST first" in said and said.count(COPY) == 2
    assert not ReplyAction.objects.filter(approval_state="APPROVED").exists()
    form = {"action": "approve", "confirm": "yes", "_selected_action": [a.pk for a in card.actions]}
    form.update({f"pin_{pk}": pin for pk, pin in confirm.context["pins"]})
    done = client.post(INBOX, form)
    assert done.status_code == 302 and done.url == INBOX
    assert set(ReplyAction.objects.filter(approval_state="APPROVED").values_list("pk", flat=True)) == {
        a.pk for a in card.actions
    }
    assert len(client.get(INBOX).context["cards"]) == 2  # the decided card left the inbox


def test_approve_one_purpose_leaves_the_other_waiting(client, inbox):
    client.force_login(_reviewer())
    public, private = client.get(INBOX).context["cards"][0].actions[::-1]
    assert private.purpose == "private_delivery"
    confirm = client.post(INBOX, {"action": "approve", "_selected_action": public.pk})
    form = {"action": "approve", "confirm": "yes", "_selected_action": public.pk}
    form.update({f"pin_{pk}": pin for pk, pin in confirm.context["pins"]})
    client.post(INBOX, form)
    assert ReplyAction.objects.get(pk=public.pk).approval_state == "APPROVED"
    assert ReplyAction.objects.get(pk=private.pk).delivery_state == "REVIEW_PENDING"


def test_close_asks_why_and_keeps_the_reason_in_the_history(client, inbox):
    client.force_login(_reviewer())
    card = client.get(INBOX).context["cards"][0]
    confirm = client.post(INBOX, {"action": "close", "card": card.event.pk})
    assert "Why it is closed" in _text(confirm) and "Not a buyer" in _text(confirm)
    ids = [a.pk for a in card.actions]
    refused = client.post(
        INBOX, {"action": "close", "confirm": "yes", "_selected_action": ids, "note": "made-up"}
    )
    assert refused.status_code == 200 and "is required" in _text(refused)  # not one of the reasons
    assert ReplyAction.objects.filter(pk__in=ids, delivery_state="REVIEW_PENDING").count() == 2
    client.post(
        INBOX, {"action": "close", "confirm": "yes", "_selected_action": ids, "note": "closed_not_a_buyer"}
    )
    assert set(ReplyAction.objects.filter(pk__in=ids).values_list("delivery_state", flat=True)) == {
        "CLOSED_NO_REPLY"
    }
    reasons = set(
        ReplyTransition.objects.filter(action_id__in=ids, next_state="CLOSED_NO_REPLY").values_list(
            "reason_code", flat=True
        )
    )
    assert reasons == {"closed_not_a_buyer"}


def test_many_cards_are_approved_with_one_confirmation_listing_every_text(client, inbox):
    client.force_login(_reviewer())
    cards = client.get(INBOX).context["cards"][:2]
    confirm = client.post(INBOX, {"action": "approve", "card": [c.event.pk for c in cards]})
    said = _text(confirm)
    assert "CHECKLIST first" in said and "CHECKLIST second" in said and said.count(COPY) == 4
    assert len(confirm.context["pins"]) == 4


def test_the_inbox_searches_as_the_ledgers_do(client, inbox, deliver):
    assert (
        deliver(_body(9, text="CHECKLIST other", handle="someone_else_test", post="post_test_99")).status_code
        == 200
    )
    client.force_login(_reviewer())
    found = client.get(INBOX, {"q": "someone_else"}).context["cards"]
    assert [c.event.sender_handle for c in found] == ["someone_else_test"]
    assert [c.event.conversation_ref for c in client.get(INBOX, {"q": "post_test_99"}).context["cards"]] == [
        "post_test_99"
    ]
    assert "No comment waiting for review matches" in _text(client.get(INBOX, {"q": "nothing_like_it"}))


def test_an_empty_inbox_says_so(client, wire):
    wire()
    client.force_login(_reviewer())
    assert "Nothing is waiting for review: the inbox is empty." in _text(client.get(INBOX))


def test_a_post_read_from_the_platform_shows_its_caption_link_and_picture(client, inbox):
    source = inbox[0].event.source
    posts_remember(
        source_id=source.pk,
        posts=[
            PostSummary(
                id="post_test_07",
                caption="Our spring checklist",
                permalink="https://example.invalid/p/post_test_07",
                published_at=None,
                kind="IMAGE",
                thumbnail="https://example.invalid/t/post_test_07.jpg",
            )
        ],
    )
    client.force_login(_reviewer())
    page = client.get(INBOX).content.decode()
    assert "Our spring checklist" in page and 'src="https://example.invalid/t/post_test_07.jpg"' in page
    assert 'href="https://example.invalid/p/post_test_07"' in page


def test_a_page_of_cards_costs_the_same_queries_however_many_cards(client, wire, deliver):
    wire()
    client.force_login(_reviewer())

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(INBOX).status_code == 200
        return len(captured)

    assert deliver(_body(0)).status_code == 200
    one = queries()
    for n in range(1, 6):
        assert deliver(_body(n)).status_code == 200
    assert queries() == one


def test_deciding_needs_the_approve_permission(client, inbox):
    user = User.objects.create_user("looker_test", password="unused-test-password", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_reviewqueue"))
    client.force_login(user)
    assert client.get(INBOX).status_code == 200
    assert "Approve" not in _text(client.get(INBOX))
    card = client.get(INBOX).context["cards"][0]
    assert client.post(INBOX, {"action": "approve", "card": card.event.pk}).status_code == 403


def test_read_recent_posts_keeps_what_the_platform_said_for_the_cards(client, provider, wire, deliver):
    state = provider()
    wire(state)
    state.post(
        "acct_test_01",
        [{"id": "post_test_07", "caption": "Spring drop", "thumbnail": "https://example.invalid/t/7.jpg"}],
    )
    assert deliver(_body(0)).status_code == 200
    client.force_login(_reviewer())
    card = client.get(INBOX).context["cards"][0]
    assert card.post is None and "not read from the platform yet" in _text(client.get(INBOX))
    done = client.post(INBOX, {"action": "read_posts", "source": card.event.source_id})
    assert done.status_code == 302
    post = client.get(INBOX).context["cards"][0].post
    assert (post.caption, post.thumbnail) == ("Spring drop", "https://example.invalid/t/7.jpg")
    assert post.permalink == "https://sandbox.example.invalid/posts/post_test_07"


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("/admin/replies/reviewqueue/", "Nothing is waiting for review"),
        ("/admin/replies/unknownsendqueue/", "No send is in doubt"),
        ("/admin/replies/strandedsendqueue/", "No reply is stuck before sending"),
    ],
)
def test_an_empty_queue_says_so(admin_client, wire, url, says):
    wire()
    assert says in _text(admin_client.get(url))
    assert "matches the search" in _text(admin_client.get(url, {"q": "nothing_test"}))


def test_the_inbox_pages_on_from_the_last_card(client, inbox, monkeypatch):
    from replies.admin import inbox as inbox_admin

    monkeypatch.setattr(inbox_admin, "CARDS_PER_PAGE", 2)
    client.force_login(_reviewer())
    first = client.get(INBOX)
    assert [c.event.message_text for c in first.context["cards"]] == ["CHECKLIST first", "CHECKLIST second"]
    assert "6 replies waiting for review" in _text(first)
    after = first.context["page"].after
    second = client.get(INBOX, {"after": after})
    assert [c.event.message_text for c in second.context["cards"]] == ["CHECKLIST third"]
    assert second.context["page"].after is None and "First page" in _text(second)
    assert client.get(INBOX, {"after": "not-a-number"}).status_code == 200
