"""The sandbox-social source reader: pages of the synthetic source from the loopback simulator."""

from __future__ import annotations

import http.client
import json
import socket
from datetime import datetime
from urllib.parse import urlencode

from conduit.loopback import loopback_address
from conduit.providers.base import (
    MAX_PAGE_BYTES,
    PageFailure,
    ProviderReceipt,
    SourceConfig,
    SourcePage,
    SourceReader,
)
from conduit.providers.reading import PostSummary, PostsUnavailable


class SandboxReader(SourceReader):
    """`GET /sources/<account>/events` on the sandbox simulator; mixed into the adapter."""

    live = False  # its read side is the loopback sandbox simulator

    def recent_posts(
        self, *, config: SourceConfig, base_url: str, limit: int, timeout: float
    ) -> list[PostSummary]:
        """`GET /sources/<account>/posts` on the sandbox simulator."""
        address = loopback_address(base_url)
        if address is None:
            raise PostsUnavailable("the sandbox source is read only from a loopback http:// URL")
        conn = http.client.HTTPConnection(*address, timeout=timeout)
        try:
            conn.request("GET", f"/sources/{config.account_ref}/posts?{urlencode({'limit': str(limit)})}")
            response = conn.getresponse()
            payload = response.read(MAX_PAGE_BYTES + 1)
        except (OSError, http.client.HTTPException) as exc:
            raise PostsUnavailable(f"the sandbox provider did not answer ({type(exc).__name__})") from None
        finally:
            conn.close()
        try:
            posts = json.loads(payload)["posts"] if response.status == 200 else None
        except (ValueError, KeyError, TypeError):
            posts = None
        if not isinstance(posts, list):
            raise PostsUnavailable(
                f"the sandbox provider's post list was not readable (HTTP {response.status})"
            )
        summaries = []
        for post in posts[:limit]:
            if not isinstance(post, dict) or not isinstance(post.get("id"), str):
                continue
            try:
                published = datetime.fromisoformat(str(post.get("published_at", "")))
            except ValueError:
                published = None
            summaries.append(
                PostSummary(
                    id=post["id"],
                    caption=str(post.get("caption", ""))[:120],
                    permalink=str(post.get("permalink", ""))
                    if str(post.get("permalink", "")).startswith("https://")
                    else "",
                    published_at=published,
                    kind=str(post.get("kind", "post"))[:32],
                    thumbnail=str(post.get("thumbnail", ""))
                    if str(post.get("thumbnail", "")).startswith("https://")
                    else "",
                )
            )
        return summaries

    def read_page(
        self,
        *,
        config: SourceConfig,
        base_url: str,
        since: datetime | None,
        until: datetime | None,
        cursor: str | None,
        limit: int,
        timeout: float,
        checkpoint: datetime | None = None,
        max_bytes: int = MAX_PAGE_BYTES,
    ) -> SourcePage:
        address = loopback_address(base_url)
        if address is None:
            raise PageFailure(
                "protocol",
                "source_url_not_loopback",
                "the sandbox source is read only from a loopback http:// URL",
            )
        query = {"limit": str(limit)}
        if cursor:
            query["cursor"] = cursor
        else:
            query.update(
                {
                    k: v.isoformat()
                    for k, v in (("since", since), ("until", until), ("checkpoint", checkpoint))
                    if v
                }
            )
        path = f"/sources/{config.account_ref}/events?{urlencode(query)}"
        conn = http.client.HTTPConnection(*address, timeout=timeout)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            # Bounded: one byte past the limit proves the page too large without buffering it.
            payload = response.read(max_bytes + 1)
        except socket.timeout:
            raise PageFailure("timeout", "page_timeout", f"no page within {timeout:g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            raise PageFailure(
                "transport", "connection_failed", f"the provider connection failed ({type(exc).__name__})"
            ) from None
        finally:
            conn.close()
        if len(payload) > max_bytes:
            raise PageFailure("protocol", "page_too_large", f"the page exceeds {max_bytes} bytes")
        if response.status != 200:
            # The provider's own code is kept only when it is a plain token; its
            # message (which may carry anything) is never read.
            try:
                code = str(json.loads(payload).get("code", ""))
            except (ValueError, AttributeError):
                code = ""
            safe = code if code.isascii() and code.replace("_", "").isalnum() and len(code) <= 48 else ""
            raise PageFailure(
                "provider", f"provider_{safe or 'failed'}", f"the provider answered HTTP {response.status}"
            )
        try:
            document = json.loads(payload)
            events = document["events"]
            scan_id = document["scan_id"]
            next_cursor = document.get("next_cursor") or None
            complete = document["complete"]
            if not (
                isinstance(events, list)
                and isinstance(scan_id, str)
                and scan_id
                and isinstance(complete, bool)
                and (next_cursor is None or isinstance(next_cursor, str))
            ):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            raise PageFailure("protocol", "malformed_page", "the provider's page is not a page") from None
        # The replies the provider shows on each event are not part of the event:
        # they come off before normalizing, so the payload hash is the webhook's.
        replied: list[tuple[int, dict]] = []
        for index, item in enumerate(events):
            replies = item.pop("replies", []) if isinstance(item, dict) else []
            if isinstance(replies, list):
                replied.extend((index, r) for r in replies if isinstance(r, dict))
        parsed = self.normalize(events, config.account_ref, config)
        keys = {o.index: o.event_key for o in parsed.observations}
        receipts = [
            ProviderReceipt(
                reply_key=str(reply.get("reply_key", ""))[:64],
                provider_reply_id=str(reply.get("id", ""))[:200],
                event_key=keys[index],
            )
            for index, reply in replied
            if index in keys and reply.get("reply_key") and reply.get("id")
        ]
        return SourcePage(
            scan_id=scan_id,
            observations=parsed.observations,
            rejections=parsed.rejections,
            receipts=receipts,
            next_cursor=next_cursor,
            complete=complete,
            size_bytes=len(payload),
        )
