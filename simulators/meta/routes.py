"""Graph routes: (method, host, node, edge) resolved to an answer in Meta's shapes, or a GraphError."""

from __future__ import annotations

import sqlite3
import time

from simulators.meta.errors import GraphError, not_found
from simulators.meta.paging import _key, _page, _time_page
from simulators.meta.shapes import _shortcode, conversation_id, field_tree, iso, parse_time
from simulators.meta.state import SimulatorState
from simulators.meta.writes import PRIVATE_REPLY_WINDOW

MAX_COMMENTS_PAGE = 50
MAX_MEDIA_PAGE = 100
# Meta: "You can only get details about the 20 most recent messages" of a conversation.
MESSAGE_DETAILS_WINDOW = 20


def _select(item: dict, fields: set[str] | None, default: set[str]) -> dict:
    wanted = (fields or default) | {"id"}
    return {k: v for k, v in item.items() if k in wanted}


def _sub(tree: dict | None, name: str, default: str) -> set[str]:
    """The subfields asked of `name` (`from{id,username}`), or its default."""
    sub = (tree or {}).get(name, (None, {}))[0]
    return set(field_tree(sub or default))


class Router:
    """Graph routes: resolve (method, host, node, edge) to an answer or a GraphError."""

    def __init__(self, state: SimulatorState) -> None:
        self.state = state

    # -- comments, media, posts -------------------------------------------------------------
    def ig_comment(self, row: sqlite3.Row, fields: str | None, *, nested: bool = True) -> dict:
        tree = field_tree(fields) if fields else None
        media = self.state.media_row(row["media_id"])
        author = {"id": row["from_id"], "username": row["from_name"]}
        item = {
            "id": row["id"],
            "text": row["text"],
            "timestamp": iso(row["created"]),
            "username": row["from_name"],
            "from": {k: v for k, v in author.items() if k in _sub(tree, "from", "id,username")},
            "media": {
                k: v
                for k, v in {"id": media["id"], "media_product_type": media["product_type"]}.items()
                if k in _sub(tree, "media", "id")
            },
            "hidden": bool(row["hidden"]),
            "like_count": 0,
        }
        if row["from_id"] == row["account"]:
            item["user"] = {"id": row["account"]}  # Meta: only on the app user's own comments
        if row["parent_id"]:
            item["parent_id"] = row["parent_id"]
        if nested and tree and "replies" in tree:
            replies = sorted(self.state.comment_rows(parent_id=row["id"]), key=_key, reverse=True)
            sub = tree["replies"][0] or "id,text,timestamp"
            item["replies"] = {"data": [self.ig_comment(r, sub, nested=False) for r in replies]}
        return _select(item, set(tree) if tree else None, {"id", "text", "timestamp"})

    def page_comment(self, row: sqlite3.Row, fields: str | None) -> dict:
        tree = field_tree(fields) if fields else None
        replied = self.state.private_replied(row["id"])
        author = {"id": row["from_id"], "name": row["from_name"]}
        item = {
            "id": row["id"],
            "message": row["text"],
            "created_time": iso(row["created"]),
            "from": {k: v for k, v in author.items() if k in _sub(tree, "from", "name,id")},
            "is_hidden": bool(row["hidden"]),
            # One private reply per comment: none is possible after one.
            "can_reply_privately": row["from_id"] != row["account"]
            and not replied
            and time.time() - row["created"] <= PRIVATE_REPLY_WINDOW,
        }
        if replied:
            # Graph omits a field with no value: the conversation appears only once there is one.
            item["private_reply_conversation"] = {"id": conversation_id(row["account"], row["from_id"])}
        if row["parent_id"]:
            item["parent"] = {"id": row["parent_id"]}
        return _select(item, set(tree) if tree else None, {"id", "message", "created_time", "from"})

    def media(self, row: sqlite3.Row, fields: str | None) -> dict:
        tree = field_tree(fields) if fields else None
        if row["object"] == "instagram":
            product = row["product_type"]
            item = {
                "id": row["id"],
                "timestamp": iso(row["created"]),
                "media_product_type": product,
                "media_type": "VIDEO" if product in ("REELS", "LIVE") else "IMAGE",
                "media_url": f"https://scontent.example.invalid/v/t51.29350-15/{row['id']}_n.jpg",
                **(
                    {"thumbnail_url": f"https://scontent.example.invalid/v/t51.29350-15/{row['id']}_t.jpg"}
                    if product in ("REELS", "LIVE")
                    else {}
                ),
                "permalink": f"https://www.instagram.com/p/{_shortcode(row['id'])}/",
                "like_count": 0,
                "comments_count": len(self.state.comment_rows(media_id=row["id"])),
            }
            if row["caption"]:  # Graph omits a caption the media has not (as recorded)
                item["caption"] = row["caption"]
            return _select(item, set(tree) if tree else None, {"id"})
        item = {
            "id": row["id"],
            "created_time": iso(row["created"]),
            "updated_time": iso(row["created"]),
            "message": row["caption"],
            "permalink_url": f"https://www.facebook.com/{row['id']}",
            "full_picture": f"https://scontent.example.invalid/v/t39.30808-6/{row['id']}_n.jpg",
        }
        return _select(item, set(tree) if tree else None, {"id", "created_time", "message"})

    def comments_summary(self, rows: list, query: dict, newest: bool) -> dict:
        """`summary=true` on a Page comment edge: order, total_count, can_comment (as recorded)."""
        order = query.get("order", [""])[0] or (
            "chronological" if query.get("filter", [""])[0] == "stream" else "ranked"
        )
        return {
            "order": "reverse_chronological" if newest else order,
            "total_count": len(rows),
            "can_comment": True,
        }

    # -- conversations and messages -----------------------------------------------------------
    def person(self, object: str, account: str, who: str) -> dict:
        """A participant as the Conversations API names one: Instagram {username, id}; Messenger
        {name, email, id} (the email is `<psid>@facebook.com`, as recorded)."""
        name = self.state.account_name(who) if who == account else self.state.person_name(account, who)
        if object == "instagram":
            return {"username": name, "id": who}
        return {"name": name, "email": f"{who}@facebook.com", "id": who}

    def message(self, row, fields: set[str] | None, *, details: bool = True) -> dict:
        item = {"id": row["mid"], "created_time": iso(row["created_ms"] / 1000)}
        if details:
            recipient = self.person(row["object"], row["account"], row["recipient"])
            item.update(
                {
                    "from": self.person(row["object"], row["account"], row["sender"]),
                    "to": {"data": [recipient]},
                    "message": row["text"],
                    "is_unsupported": False,
                }
            )
        return _select(item, fields, {"id", "created_time"})

    def message_edge(
        self, conversation: str, sub: str | None, opts: dict, base_url: str, root: str, token: str = ""
    ) -> dict:
        """A conversation's `messages`, newest first; details only for the 20 most recent (Meta:
        "You can only get details about the 20 most recent messages"): older ones keep id and time.
        `next` is `/{conversation-id}/messages` with the same subfields."""
        rows = self.state.conversation_messages(conversation)
        fields = set(field_tree(sub)) if sub else None
        edge_query = {name: [opts[name]] for name in ("limit", "after") if name in opts}
        if sub:
            edge_query["fields"] = [sub]
        if token:
            edge_query["access_token"] = [token]  # Meta's links carry the request's token
        return _page(
            self.state,
            rows,
            edge_query,
            newest_first=True,
            cap=MAX_MEDIA_PAGE,
            base_url=base_url,
            path=f"{root}/{conversation}/messages",
            before=False,
            always=False,
            render=lambda r: self.message(r, fields, details=r["rank"] < MESSAGE_DETAILS_WINDOW),
        )

    def conversation(self, row, fields: str | None, base_url: str, root: str, token: str) -> dict:
        tree = field_tree(fields) if fields else {"id": (None, {})}
        item: dict = {}
        if "messages" in tree:
            sub, opts = tree["messages"]
            item["messages"] = self.message_edge(row["conversation"], sub, opts, base_url, root, token)
        if "participants" in tree:
            item["participants"] = {
                "data": [
                    self.person(row["object"], row["account"], row["person"]),
                    self.person(row["object"], row["account"], row["account"]),
                ]
            }
        if "updated_time" in tree:
            last = self.state.conversation_messages(row["conversation"])
            item["updated_time"] = iso(last[0]["created"]) if last else None
        item["id"] = row["conversation"]
        return item

    def conversation_list(
        self, host: str, account: sqlite3.Row, query: dict, base_url: str, path: str, root: str
    ) -> dict:
        platform = query.get("platform", [""])[0]
        if platform and platform not in ("instagram", "messenger"):
            raise GraphError(100, message="(#100) param platform must be one of {INSTAGRAM, MESSENGER}")
        if account["object"] == "instagram":
            if host != "instagram":
                # Unverified: the documented Facebook Login route is /{page-id}/conversations.
                raise GraphError(100, message="(#100) Tried accessing nonexisting field (conversations)")
            accounts = [account["id"]]
        elif (platform or "messenger") == "instagram":
            # A Page token reaches the Instagram account linked to the Page.
            with self.state.lock:
                linked = self.state._all("SELECT id FROM accounts WHERE page_id = ?", account["id"])
            accounts = [r["id"] for r in linked]
        else:
            accounts = [account["id"]]
        person = query.get("user_id", [""])[0] or None
        rows = self.state.conversations(accounts, person)
        tree = field_tree(query.get("fields", [""])[0]) if query.get("fields", [""])[0] else None

        def render(r: dict) -> dict:
            item: dict = {"id": r["id"], "updated_time": iso(r["created"])}
            if tree and "participants" in tree:
                item["participants"] = {
                    "data": [
                        self.person(r["object"], r["account"], r["person"]),
                        self.person(r["object"], r["account"], r["account"]),
                    ]
                }
            if tree and "messages" in tree:
                sub, opts = tree["messages"]
                item["messages"] = self.message_edge(
                    r["id"], sub, opts, base_url, root, query.get("access_token", [""])[0]
                )
            return _select(item, set(tree) if tree else None, {"id", "updated_time"})

        return _page(
            self.state,
            rows,
            query,
            newest_first=True,
            cap=MAX_MEDIA_PAGE,
            render=render,
            base_url=base_url,
            path=path,
            before=False,
            always=False,
        )

    # -- the routes ---------------------------------------------------------------------------
    def get(self, host: str, node: str, edge: str | None, query: dict, base_url: str, path: str) -> dict:
        if node == "debug_token" and edge is None and host != "instagram":
            # The Facebook host's token inspection (graph.instagram.com has none).
            known = self.state.token_debug(query.get("input_token", [""])[0])
            if known is not None:
                return {"data": {"type": "USER", **known, "app_id": self.state.app_id or ""}}
            return {
                "data": {
                    "is_valid": self.state.token_valid,
                    "expires_at": self.state.token_expires_at,
                    "type": "PAGE",
                    "app_id": self.state.app_id or "",
                }
            }
        found = self.state.find(node)
        if found is None:
            raise not_found(node)
        kind, row = found
        if host == "instagram" and row["object"] != "instagram":
            raise not_found(node)  # Page and Messenger objects live on the Facebook host only
        fields = query.get("fields", [""])[0] or None
        # The path up to the version ("/v26.0", "/instagram/v26.0"): where other nodes' links start.
        root = "/" + "/".join(path.strip("/").split("/")[: 2 if host == "instagram" else 1])
        since = parse_time(query["since"][0]) if query.get("since") else None
        until = parse_time(query["until"][0]) if query.get("until") else None
        page = lambda rows, newest_first, cap, render: _page(
            self.state,
            rows,
            query,
            newest_first=newest_first,
            cap=cap,
            render=render,
            base_url=base_url,
            path=path,
        )
        if edge is None:
            if kind == "account":
                return {
                    "id": row["id"],
                    ("username" if row["object"] == "instagram" else "name"): row["name"],
                }
            if kind == "media":
                return self.media(row, fields)
            if kind == "conversation":
                return self.conversation(row, fields, base_url, root, query.get("access_token", [""])[0])
            if kind == "message":
                if self.state.message_rank(row) >= MESSAGE_DETAILS_WINDOW:
                    # Meta: "an error will be returned stating that the message has been deleted"
                    # (its code is not recorded; 100 is Graph's code for an object it will not load).
                    raise GraphError(100, message="(#100) This message has been deleted.")
                return self.message(row, set(field_tree(fields)) if fields else None)
            return (
                self.ig_comment(row, fields)
                if row["object"] == "instagram"
                else self.page_comment(row, fields)
            )
        if edge == "subscribed_apps" and kind == "account":
            return {"data": self.state.subscribed_apps(node)}
        if edge == "conversations" and kind == "account":
            return self.conversation_list(host, row, query, base_url, path, root)
        if kind == "account" and row["object"] == "instagram" and edge == "media":
            return page(
                self.state.media_list(node, since, until),
                True,
                MAX_MEDIA_PAGE,
                lambda r: self.media(r, fields),
            )
        if kind == "account" and row["object"] == "page" and edge in ("feed", "posts"):
            if self.state.feed_paging(node) == "cursor":
                return page(
                    self.state.media_list(node, since, until),
                    True,
                    MAX_MEDIA_PAGE,
                    lambda r: self.media(r, fields),
                )
            return _time_page(
                self.state,
                self.state.media_list(node, None, None),
                query,
                cap=MAX_MEDIA_PAGE,
                render=lambda r: self.media(r, fields),
                base_url=base_url,
                path=path,
            )
        if kind == "media" and edge == "comments":
            rows = self.state.comment_rows(media_id=node)
            if row["object"] == "instagram":
                return page(
                    [r for r in rows if not r["parent_id"]],
                    True,
                    MAX_COMMENTS_PAGE,
                    lambda r: self.ig_comment(r, fields),
                )
            if query.get("filter", [""])[0] != "stream":
                rows = [r for r in rows if not r["parent_id"]]
            newest = query.get("order", ["chronological"])[0] == "reverse_chronological"
            answer = page(rows, newest, MAX_COMMENTS_PAGE, lambda r: self.page_comment(r, fields))
            if query.get("summary", [""])[0] in ("true", "1"):
                answer["summary"] = self.comments_summary(rows, query, newest)
            return answer
        if kind == "comment" and row["object"] == "instagram" and edge == "replies":
            return page(
                self.state.comment_rows(parent_id=node),
                True,
                MAX_COMMENTS_PAGE,
                lambda r: self.ig_comment(r, fields, nested=False),
            )
        if kind == "comment" and row["object"] == "page" and edge == "comments":
            newest = query.get("order", ["chronological"])[0] == "reverse_chronological"
            rows = self.state.comment_rows(parent_id=node)
            answer = page(rows, newest, MAX_COMMENTS_PAGE, lambda r: self.page_comment(r, fields))
            if query.get("summary", [""])[0] in ("true", "1"):
                answer["summary"] = self.comments_summary(rows, query, newest)
            return answer
        if kind == "conversation" and edge == "messages":
            return self.message_edge(
                row["conversation"],
                fields,
                {k: v[0] for k, v in query.items() if k in ("limit", "after")},
                base_url,
                root,
                query.get("access_token", [""])[0],
            )
        raise GraphError(100, message=f"(#100) Tried accessing nonexisting field ({edge})")

    def post(self, host: str, node: str, edge: str | None, params: dict) -> dict:
        if edge == "messages" and host == "facebook" and self.state.whatsapp_route(node, params):
            return self.state.whatsapp_send(phone_number_id=node, body=params)
        found = self.state.find(node)
        if found is None:
            raise not_found(node)
        kind, row = found
        if host == "instagram" and row["object"] != "instagram":
            raise not_found(node)
        if kind == "comment" and row["object"] == "instagram" and edge == "replies":
            return self.state.public_reply(
                comment_id=node, message=str(params.get("message") or ""), host=host
            )
        if kind == "comment" and row["object"] == "page" and edge == "comments":
            return self.state.public_reply(
                comment_id=node, message=str(params.get("message") or ""), host=host
            )
        if kind == "account" and edge == "messages":
            return self.state.private_reply(node=node, host=host, body=params)
        if kind == "account" and edge == "subscribed_apps":
            # The app the token belongs to subscribes to the named fields (graph-api/reference/
            # page/subscribed_apps, "Creating"): {"success": true}.
            fields = [f for f in str(params.get("subscribed_fields") or "").split(",") if f]
            if not fields or not self.state.app_id:
                raise GraphError(100, message="(#100) Invalid parameter")
            self.state.subscription_set(account=node, app_id=self.state.app_id, fields=fields)
            return {"success": True}
        raise GraphError(100, message=f"(#100) Unsupported post request ({edge})")

    def delete(self, host: str, node: str, edge: str | None) -> dict:
        """`DELETE /{page-id or ig-id}/subscribed_apps`: the app unsubscribed from the account, so
        notifications stop; `{"success": true}` as Meta answers (graph-api/reference/page/subscribed_apps)."""
        found = self.state.find(node)
        if found is None:
            raise not_found(node)
        kind, row = found
        if host == "instagram" and row["object"] != "instagram":
            raise not_found(node)
        if kind == "account" and edge == "subscribed_apps":
            self.state.subscription_set(account=node, app_id=self.state.app_id or "", fields=[])
            return {"success": True}
        raise GraphError(100, message="(#100) Unsupported delete request")
