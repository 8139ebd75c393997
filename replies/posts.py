"""The account's recent posts, read from its platform, for a person to pick a campaign's posts by what they are
(and kept for the inbox's cards)."""

from __future__ import annotations

from conduit.providers.reading import PostSummary, PostsUnavailable
from conduit.providers.registry import get_adapter
from ingress.models import Source
from ingress.selectors import source_config
from replies.services.posts import posts_remember

POSTS_LISTED = 25
TIMEOUT = 10.0


def recent_posts(source: Source) -> tuple[list[PostSummary], str]:
    """(posts newest first, "") or ([], why they could not be listed)."""
    if not source.source_url:
        return [], f"source {source.name!r} has no read URL: give the posts' ids instead"
    try:
        config = source_config(source, with_token=True)
        posts = get_adapter(source.adapter).recent_posts(
            config=config, base_url=source.source_url, limit=POSTS_LISTED, timeout=TIMEOUT
        )
    except PostsUnavailable as unavailable:
        return [], f"the posts of {source.name!r} could not be listed: {unavailable}"
    except Exception as exc:  # the token could not be read, the adapter is gone: say so, never crash the page
        return [], f"the posts of {source.name!r} could not be listed ({type(exc).__name__})"
    posts_remember(source_id=source.pk, posts=posts)  # the inbox's cards show what was read
    return posts, ""
