"""The two Meta source readers: Instagram media comments and Page feed comments (and each one's DMs)."""

from __future__ import annotations

from conduit.providers.base import SourceConfig
from conduit.providers.meta.graph import GraphCallFailed, graph_get
from conduit.providers.meta.graph_pages import _failure, _when
from conduit.providers.meta.reader import COMMENTS_PAGE_MAX, _author, _GraphFanOutReader, _malformed
from conduit.providers.meta.scan_cursor import _id, _Scan
from conduit.providers.reading import PostSummary, PostsUnavailable

POSTS_MAX = 50  # posts listed for a person to pick from
CAPTION_START = 120  # characters of a caption a person reads to recognise a post


class _RecentPosts:
    """An account's recent posts or media, newest first: `GET /{account}/{posts_edge}`, one page."""

    posts_edge = ""
    posts_fields = ""
    posts_text = ""  # the field holding a post's text
    posts_time = ""
    posts_link = ""
    posts_images: tuple[str, ...] = ()  # the fields holding an image of the post, preferred first

    def image_fields(self, item: dict) -> tuple[str, ...]:
        return self.posts_images

    def post_kind(self, item: dict) -> str:
        raise NotImplementedError

    def recent_posts(
        self, *, config: SourceConfig, base_url: str, limit: int, timeout: float
    ) -> list[PostSummary]:
        if not config.access_token:
            raise PostsUnavailable("the account has no access token: connect it first")
        try:
            document = graph_get(
                base_url=base_url.rstrip("/"),
                path=f"{config.account_ref}/{self.posts_edge}",
                params={"fields": self.posts_fields, "limit": str(max(1, min(limit, POSTS_MAX)))},
                access_token=config.access_token,
                timeout=timeout,
            ).document
        except GraphCallFailed as error:
            raise PostsUnavailable(_failure(error, timeout, f"the {self.posts_edge} list").message) from None
        items = document.get("data")
        if not isinstance(items, list):
            raise PostsUnavailable(f"the Graph answer for the {self.posts_edge} list is not a list page")
        posts = []
        for item in items[:limit]:
            post_id = _id(item.get("id")) if isinstance(item, dict) else None
            if post_id is None:
                continue  # a malformed entry is not offered: its id is what a campaign names
            text = item.get(self.posts_text)
            link = item.get(self.posts_link)
            posts.append(
                PostSummary(
                    id=post_id,
                    caption=text[:CAPTION_START] if isinstance(text, str) else "",
                    permalink=link if isinstance(link, str) and link.startswith("https://") else "",
                    published_at=_when(item.get(self.posts_time)),
                    kind=self.post_kind(item),
                    thumbnail=next(
                        (
                            url
                            for url in (item.get(name) for name in self.image_fields(item))
                            if isinstance(url, str) and url.startswith("https://")
                        ),
                        "",
                    ),
                )
            )
        return posts


# Inline replies kept per Instagram comment; a comment with more is queued for `/replies`,
# so one comment page yields at most (1 + INLINE_REPLIES) items per comment.
INLINE_REPLIES = 25


def _item(obj: str, field_name: str, value: dict) -> dict:
    """A read comment in the webhook's shape (`_apply` adds its time and whether the account wrote it)."""
    return {"object": obj, "field": field_name, "value": value, "entry_time": None, "read": True}


class MetaInstagramReader(_RecentPosts, _GraphFanOutReader):
    """Instagram: `/{ig-user-id}/media`, then each media's `/comments` with nested replies; DMs
    from `/{ig-user-id}/conversations?platform=instagram`."""

    object = "instagram"
    conversations_platform = "instagram"
    field = "comments"
    parent_name = "media"
    list_edge = "media"
    list_fields = "id,timestamp,media_product_type"
    list_time = "timestamp"
    item_time = "timestamp"
    reply_fields = "id,text,timestamp,username,from{id,username},parent_id"
    comment_fields = (
        "id,text,timestamp,username,from{id,username},media{id,media_product_type},parent_id,"
        "replies{id,text,timestamp,username,from{id,username},parent_id}"
    )
    comment_params: dict[str, str] = {}
    posts_edge = "media"
    posts_fields = "id,caption,permalink,timestamp,media_type,media_product_type,media_url,thumbnail_url"
    posts_text, posts_time, posts_link = "caption", "timestamp", "permalink"
    # A video's media_url is the video: its thumbnail_url is the picture.
    posts_images = ("thumbnail_url", "media_url")

    def image_fields(self, item: dict) -> tuple[str, ...]:
        # A video's media_url is the video file, no picture: only its thumbnail_url is one.
        return ("thumbnail_url",) if item.get("media_type") == "VIDEO" else self.posts_images

    def post_kind(self, item: dict) -> str:
        # REELS, FEED, STORY...; the older media_type (IMAGE, VIDEO, CAROUSEL_ALBUM) where it is all there is.
        for name in ("media_product_type", "media_type"):
            if isinstance(item.get(name), str):
                return item[name][:32]
        return "media"

    def comments_limit(self, room: int) -> int:
        # Each comment may bring INLINE_REPLIES replies: keep the page within `limit`.
        return max(1, min(COMMENTS_PAGE_MAX, room // (1 + INLINE_REPLIES)))

    def _value(self, comment: dict, media: dict, parent_id: str | None) -> dict:
        author = _author(comment, ("id", "username"))
        if "id" not in author and isinstance(comment.get("user"), dict):
            # Recorded answers name the account's own comment by `user` (the app user) without `from`.
            author = {key: comment["user"][key] for key in ("id", "username") if key in comment["user"]}
        if "username" not in author and isinstance(comment.get("username"), str):
            author["username"] = comment["username"]
        value = {
            "id": _id(comment["id"]),
            "text": comment.get("text"),
            "timestamp": comment.get("timestamp"),
            "from": author,
            "media": media,
        }
        if parent_id:
            value["parent_id"] = parent_id
        return value

    def comment_items(self, comment: dict, parent: list, scan: _Scan) -> list[dict]:
        read_media = comment.get("media") if isinstance(comment.get("media"), dict) else {}
        media = {"id": parent[0]}
        if "media_product_type" in read_media:
            media["media_product_type"] = read_media["media_product_type"]
        parent_id = comment.get("parent_id") if _id(comment.get("parent_id")) else None
        items = [_item(self.object, self.field, self._value(comment, media, parent_id))]
        replies = comment.get("replies")
        if isinstance(replies, dict):
            data = replies.get("data") if isinstance(replies.get("data"), list) else []
            paging = replies.get("paging") if isinstance(replies.get("paging"), dict) else {}
            comment_id = _id(comment["id"])
            if len(data) > INLINE_REPLIES or paging.get("next"):
                # Too many to keep inline: all of them come from /{comment-id}/replies instead.
                if comment_id not in scan.r:
                    scan.r.append(comment_id)
            elif any(not isinstance(reply, dict) or _id(reply.get("id")) is None for reply in data):
                raise _malformed("a comment's replies")
            else:
                items.extend(
                    _item(self.object, self.field, self._value(reply, media, comment_id)) for reply in data
                )
        return items

    def reply_items(self, reply: dict, comment_id: str, parent: list) -> list[dict]:
        return [_item(self.object, self.field, self._value(reply, {"id": parent[0]}, comment_id))]


class MetaPageReader(_RecentPosts, _GraphFanOutReader):
    """Facebook Page: `/{page-id}/feed` (visitor posts included), then each post's `/comments?filter=stream`;
    Messenger DMs from `/{page-id}/conversations?platform=messenger`."""

    object = "page"
    conversations_platform = "messenger"
    field = "feed"
    parent_name = "post"
    list_edge = "feed"
    list_fields = "id,created_time"
    list_time = "created_time"
    item_time = "created_time"
    reply_fields = ""
    comment_fields = "id,message,created_time,from{id,name},parent{id}"
    # filter=stream: every comment of the post, replies included, flat and chronological.
    comment_params = {"filter": "stream"}
    # The Page's own posts (the feed has visitors' posts too): what a business runs a campaign on.
    posts_edge = "posts"
    posts_fields = "id,message,permalink_url,created_time,full_picture"
    posts_text, posts_time, posts_link = "message", "created_time", "permalink_url"
    posts_images = ("full_picture",)

    def post_kind(self, item: dict) -> str:
        return "Page post"

    def comment_items(self, comment: dict, parent: list, scan: _Scan) -> list[dict]:
        post_id = parent[0]
        reply_to = comment.get("parent") if isinstance(comment.get("parent"), dict) else {}
        value = {
            "item": "comment",
            "verb": "add",
            "comment_id": _id(comment["id"]),
            "post_id": post_id,
            "parent_id": _id(reply_to.get("id")) or post_id,
            "from": _author(comment, ("id", "name")),
            "message": comment.get("message"),
            "created_time": comment.get("created_time"),
        }
        return [_item(self.object, self.field, value)]
