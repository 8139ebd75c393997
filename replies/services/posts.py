"""The account's posts as last read from its platform, kept for the inbox's cards."""

from __future__ import annotations

from django.utils import timezone

from conduit.providers.reading import PostSummary
from replies.models import Post

KEPT = ("caption", "permalink", "thumbnail", "kind", "published_at", "read_at")


def posts_remember(*, source_id: int, posts: list[PostSummary]) -> int:
    """Keep what the platform said of each post (newest reading wins); returns how many."""
    now = timezone.now()
    rows = [
        Post(
            source_id=source_id,
            post_ref=post.id,
            caption=post.caption[:200],
            permalink=post.permalink[:1000],
            thumbnail=post.thumbnail[:2000],
            kind=post.kind[:32],
            published_at=post.published_at,
            read_at=now,
        )
        for post in {p.id: p for p in posts}.values()
    ]
    Post.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["source", "post_ref"], update_fields=list(KEPT)
    )
    return len(rows)
