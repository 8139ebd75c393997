"""Campaigns on a synthetic Instagram account at the Graph simulator, comments delivered as Meta notifies them."""

from __future__ import annotations

import pytest

from tests.providers.meta.sending.conftest import (  # noqa: F401  (fixtures, re-exported for this directory)
    IG_ACCOUNT,
    _meta_env,
    capture,
    deliver,
    graph,
    ig_comment_body,
    meta_source,
    post_meta,
    sim,
)

MEDIA_A, MEDIA_B, MEDIA_C = "17800000000000501", "17800000000000502", "17800000000000503"
ROUTES = {"public_ack": "meta-comment-reply", "private_delivery": "meta-private-reply"}


@pytest.fixture
def instagram(graph):
    """A connected Instagram account at the simulator: both purposes routed, its every-post
    campaign (keyword "price", from its registration) with one copy per purpose."""
    return meta_source(graph, kind="instagram", purposes=ROUTES)


@pytest.fixture
def comment(deliver):
    """Deliver one Instagram comment on a media: the event it became."""
    from ingress.models import InboundEvent

    counter = iter(range(1, 100_000))

    def _comment(media: str, text: str, *, comment_id: str | None = None):
        comment_id = comment_id or f"1790000000{next(counter):07d}"
        deliver(ig_comment_body(comment_id, media, text=text))
        return InboundEvent.objects.get(message_ref=comment_id)

    return _comment
