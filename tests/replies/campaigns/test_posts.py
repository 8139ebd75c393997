"""Choosing a campaign's posts by what they are: the account's recent posts read from the platform
(recorded Graph answers, the Graph simulator, the sandbox provider), and the picker page."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from conduit.providers.meta.adapters import MetaInstagramAdapter, MetaPageAdapter
from conduit.providers.reading import PostsUnavailable
from tests.providers.meta.integration.test_recorded_graph import Answering, recorded
from tests.providers.meta.integration.test_recorded_graph import config as config_for
from tests.replies.campaigns.conftest import MEDIA_A, MEDIA_B, sim


def _read(adapter, config, answer):
    with Answering(
        {("GET", f"/v26.0/{config.account_ref}/{adapter.posts_edge}"): lambda q: (200, answer)}
    ) as graph:
        posts = adapter.recent_posts(config=config, base_url=f"{graph.url}/v26.0", limit=25, timeout=5)
        (asked,) = graph.asked
    return posts, asked[2]


def test_instagram_media_are_read_from_the_recorded_media_list():
    answer = recorded("instagram/answer_media__list_page")
    config = config_for("17841000000000901", "meta-instagram")
    posts, query = _read(MetaInstagramAdapter(), config, answer)
    assert (
        query["fields"]
        == "id,caption,permalink,timestamp,media_type,media_product_type,media_url,thumbnail_url"
    )
    assert [(p.id, p.caption, p.permalink, p.kind, p.thumbnail) for p in posts] == [
        (item["id"], "", item["permalink"], item["media_type"], item["media_url"]) for item in answer["data"]
    ]  # the recorded media have no caption: Graph leaves the field out
    assert posts[0].published_at == datetime(2021, 8, 13, 8, 25, 28, tzinfo=timezone.utc)


def test_page_posts_are_read_from_the_recorded_posts_list():
    answer = recorded("page/answer_posts__time_paged")
    config = config_for("4", "meta-page")
    posts, query = _read(MetaPageAdapter(), config, answer)
    assert query["fields"] == "id,message,permalink_url,created_time,full_picture"
    assert [(p.id, p.caption, p.kind) for p in posts] == [
        (item["id"], item["message"], "Page post") for item in answer["data"]
    ]
    assert {p.permalink for p in posts} == {""}  # not in the recorded answer (not asked for there)


def test_a_page_post_s_picture_is_its_recorded_full_picture():
    answer = recorded("page/answer_feed__cursor_paged")  # the recorded feed carries full_picture
    config = config_for("4", "meta-page")
    posts, _ = _read(MetaPageAdapter(), config, answer)
    pictures = [item.get("full_picture", "") for item in answer["data"]]
    assert [p.thumbnail for p in posts] == pictures and any(pictures) and not all(pictures)


def test_a_refusal_says_why_in_conduits_words():
    answer = recorded("page/answer_error__code190_expired")
    config = config_for("4", "meta-page")
    with Answering({("GET", "/v26.0/4/posts"): lambda q: (400, answer)}) as graph:
        with pytest.raises(PostsUnavailable) as refused:
            MetaPageAdapter().recent_posts(config=config, base_url=f"{graph.url}/v26.0", limit=5, timeout=5)
    assert "190" in str(refused.value)
    assert answer["error"]["message"] not in str(refused.value)  # Meta's text is never repeated


@pytest.mark.django_db
def test_the_picker_lists_the_simulators_media_and_fills_the_campaign_form(instagram, graph, admin_client):
    sim(
        graph,
        "/_sim/media",
        {
            "account": instagram.account_ref,
            "id": MEDIA_A,
            "caption": "Comment GUIDE for the link",
            "media_product_type": "REELS",
            "created_time": 1764000000,
        },
    )
    sim(graph, "/_sim/media", {"account": instagram.account_ref, "id": MEDIA_B, "created_time": 1764000100})
    page = admin_client.get(f"/admin/replies/campaign/posts/?source={instagram.pk}").content.decode()
    assert "Comment GUIDE for the link" in page and "REELS" in page
    assert f'value="{MEDIA_A}"' in page and f'value="{MEDIA_B}"' in page
    assert "(no caption)" in page
    assert page.index(MEDIA_B) < page.index(MEDIA_A)  # newest first
    form = admin_client.get(
        f"/admin/replies/campaign/add/?source={instagram.pk}&post={MEDIA_A}"
    ).content.decode()
    assert f"\n{MEDIA_A}</textarea>" in form  # the picked post, in the form's posts box


@pytest.mark.django_db
def test_the_sandbox_provider_lists_its_posts(sandbox_source, provider, wire):
    from replies.posts import recent_posts

    state = provider()
    wire(state)
    sandbox_source.refresh_from_db()
    state.post(
        sandbox_source.account_ref,
        [
            {
                "id": "post_test_1",
                "caption": "Comment CHECKLIST",
                "kind": "reel",
                "published_at": "2026-11-30T10:00:00+00:00",
            }
        ],
    )
    posts, problem = recent_posts(sandbox_source)
    assert problem == ""
    assert [(p.id, p.caption, p.kind) for p in posts] == [("post_test_1", "Comment CHECKLIST", "reel")]


@pytest.mark.django_db
def test_a_source_without_a_read_url_says_to_give_the_ids(sandbox_source):
    from replies.posts import recent_posts

    assert recent_posts(sandbox_source) == (
        [],
        "source 'sandbox' has no read URL: give the posts' ids instead",
    )
