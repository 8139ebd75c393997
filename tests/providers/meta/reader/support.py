"""Helpers for the Meta reader tests: readers mixed into the webhook adapters, configs, a scan loop."""

from __future__ import annotations

from datetime import datetime, timezone

from conduit.loopback import LOOPBACK_HOSTS
from conduit.providers.base import SourceConfig, SourcePage
from conduit.providers.meta.platform_readers import MetaInstagramReader, MetaPageReader
from conduit.providers.meta.webhook import MetaInstagramWebhook, MetaPageWebhook

IG_ACCOUNT = "17841400000000001"
PAGE_ACCOUNT = "100000000000001"
TOKEN = "EAAtestonlytoken0000000000000000"  # synthetic: it opens nothing
EVENT_TYPES = frozenset(
    {
        "comment.created",
        "comment.edited",
        "comment.removed",
        "comment.hidden",
        "comment.unhidden",
        "message.created",
    }
)


class InstagramReaderUnderTest(MetaInstagramReader, MetaInstagramWebhook):
    """The reader mixed into the webhook adapter, as the lead's MetaInstagramAdapter is."""


class PageReaderUnderTest(MetaPageReader, MetaPageWebhook):
    """The reader mixed into the webhook adapter, as the lead's MetaPageAdapter is."""


def outside_hosts(attempted: list[str]) -> list[str]:
    return [host for host in attempted if host not in LOOPBACK_HOSTS]


def config(account: str = IG_ACCOUNT, *, system: str = "meta-instagram", token: str = TOKEN) -> SourceConfig:
    return SourceConfig(
        name=f"{system}-test",
        source_system=system,
        account_ref=account,
        event_types=EVENT_TYPES,
        contract_version="meta-v1",
        canary=False,
        access_token=token,
    )


def at(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)


def scan(
    reader,
    *,
    base_url: str,
    cfg: SourceConfig,
    limit: int = 1000,
    since=None,
    until=None,
    timeout: float = 10.0,
    max_pages: int = 500,
    between=None,
    **kw,
) -> list[SourcePage]:
    """Read pages until completion, as reconcile does, checking the page protocol (docs/concepts/reconciliation.md#page-protocol) on each."""
    pages: list[SourcePage] = []
    cursor = None
    seen: set[str] = set()
    for number in range(max_pages):
        page = reader.read_page(
            config=cfg,
            base_url=base_url,
            since=since,
            until=until or at(4_000_000_000),
            cursor=cursor,
            limit=limit,
            timeout=timeout,
            **kw,
        )
        pages.append(page)
        assert page.scan_id and page.scan_id == pages[0].scan_id
        if page.complete:
            assert page.next_cursor is None
            return pages
        assert page.next_cursor and page.next_cursor not in seen and len(page.next_cursor.encode()) <= 4096
        seen.add(page.next_cursor)
        cursor = page.next_cursor
        if between is not None:
            between(number, page)
    raise AssertionError(f"no completion in {max_pages} pages")


def keys(pages: list[SourcePage]) -> set[str]:
    return {o.source_event_id for page in pages for o in page.observations}
