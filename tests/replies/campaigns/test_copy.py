"""Variants rotate by reply key; a copy edit is a new version that never changes what was approved,
and asks for approval again only where the text that would go out changed."""

from __future__ import annotations

from collections import Counter

import pytest

from replies.contract import reply_key
from replies.matching import variant_index
from replies.models import ReplyAction
from replies.selectors import approved_copy, copy_for
from replies.services import campaign_copy_set, campaign_create, reply_approve
from tests.replies.campaigns.conftest import MEDIA_A

pytestmark = pytest.mark.django_db
TEXTS = ["Thanks! Check your DMs.", "Sent you the guide!", "On its way to your inbox."]


def _reel(source, texts=TEXTS):
    return campaign_create(
        name="reel A",
        source_id=source.pk,
        posts=[MEDIA_A],
        keywords=["guide"],
        copies={"public_ack": list(texts)},
        activate=True,
        actor="editor_test",
    )


def test_a_thousand_replies_use_each_of_three_texts_about_a_third_of_the_time(instagram):
    reel = _reel(instagram)
    actions = [
        ReplyAction(
            reply_key=reply_key(f"meta-instagram:acct:comment.created:evt_test_{n}", "public_ack"),
            campaign_id=reel.pk,
            purpose="public_ack",
        )
        for n in range(1000)
    ]
    chosen = [copy_for(a) for a in actions]
    counts = Counter(c.text for c in chosen)
    assert set(counts) == set(TEXTS)
    assert all(280 <= n <= 390 for n in counts.values()), counts
    # The same reply key always gets the same text, its version naming the variant.
    again = [copy_for(a) for a in actions]
    assert [c.copy_version for c in again] == [c.copy_version for c in chosen]
    assert {c.copy_version for c in chosen} == {f"c{reel.pk}-v1.1", f"c{reel.pk}-v1.2", f"c{reel.pk}-v1.3"}
    assert all(c.text == TEXTS[variant_index(a.reply_key, 3)] for a, c in zip(actions, chosen))


def test_the_reviewer_sees_and_approves_the_exact_variant(instagram, comment, admin_client):
    reel = _reel(instagram)
    action = ReplyAction.objects.get(event=comment(MEDIA_A, "guide"), purpose="public_ack")
    variant = copy_for(action)
    page = admin_client.get("/admin/replies/reviewqueue/").content.decode()
    assert variant.text in page and variant.copy_version in page
    assert all(text not in page for text in TEXTS if text != variant.text)
    assert reply_approve(
        action_id=action.pk, actor="reviewer_test", shown_copy_version=variant.copy_version
    ).ok
    action.refresh_from_db()
    assert action.copy_version == variant.copy_version
    assert approved_copy(
        source_id=instagram.pk, purpose="public_ack", copy_version=action.copy_version
    ).text == (variant.text)
    assert reel.pk == action.campaign_id


def test_a_copy_edit_keeps_what_was_approved_and_asks_again_only_where_the_text_changed(instagram, comment):
    reel = _reel(instagram, ["Thanks! Check your DMs."])
    approved, changed, same = (
        ReplyAction.objects.get(event=comment(MEDIA_A, f"guide {n}"), purpose="public_ack") for n in range(3)
    )
    assert reply_approve(action_id=approved.pk, actor="reviewer_test", shown_copy_version=f"c{reel.pk}-v1").ok

    # A new text: the approved reply keeps its own; a pending one shown the old text is refused.
    campaign_copy_set(
        campaign_id=reel.pk, purpose="public_ack", texts=["Check your inbox!"], actor="editor_test"
    )
    approved.refresh_from_db()
    assert approved.copy_version == f"c{reel.pk}-v1"
    assert approved_copy(
        source_id=instagram.pk, purpose="public_ack", copy_version=approved.copy_version
    ).text == ("Thanks! Check your DMs.")
    refused = reply_approve(action_id=changed.pk, actor="reviewer_test", shown_copy_version=f"c{reel.pk}-v1")
    assert not refused.ok and "the copy changed" in refused.message
    assert copy_for(changed).text == "Check your inbox!"  # what a reviewer is shown now

    # A newer set in which this reply's variant reads as the one it was shown: approved as it is.
    texts = ["Check your inbox!", "Another text"]
    if variant_index(same.reply_key, 2) == 1:
        texts.reverse()
    campaign_copy_set(campaign_id=reel.pk, purpose="public_ack", texts=texts, actor="editor_test")
    result = reply_approve(action_id=same.pk, actor="reviewer_test", shown_copy_version=f"c{reel.pk}-v2")
    assert result.ok, result.message
    same.refresh_from_db()
    assert same.copy_version.startswith(f"c{reel.pk}-v3.")
    assert reel.pk == same.campaign_id
    reel.refresh_from_db()
    assert reel.version == 3  # each copy set a new version
