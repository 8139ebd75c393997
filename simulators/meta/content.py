"""What the platform holds, added through the control API: media, posts, comments and DMs."""

from __future__ import annotations

import sqlite3
import time

from simulators.meta.shapes import _whole_seconds, conversation_id, message_id


class Content:
    """SimulatorState's content: media and posts, comments (and their changes), messages."""

    def media_upsert(
        self,
        *,
        account: str,
        id: str | None,
        object: str,
        product_type: str | None = None,
        created: float | None = None,
        ad_id: str | None = None,
        caption: str = "",
    ) -> sqlite3.Row:
        with self._tx():
            if not id:
                id = self._new_id(object, account, post=True)
            row = self._one("SELECT * FROM media WHERE id = ?", id)
            if row is None:
                self.db.execute(
                    "INSERT INTO media (id, account, object, product_type, created, ad_id, seq, caption) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        id,
                        account,
                        object,
                        product_type or ("FEED" if object == "instagram" else "POST"),
                        _whole_seconds() if created is None else created,
                        ad_id,
                        self._next("order"),
                        caption,
                    ),
                )
                row = self._one("SELECT * FROM media WHERE id = ?", id)
            elif row["account"] != account:
                raise ValueError(f"{id} belongs to account {row['account']}")
            return row

    def comment_create(self, data: dict) -> dict:
        """Add a comment (and its media/post on first use); notify it when asked to."""
        account = str(data["account"])
        media_id = data.get("media_id") or data.get("post_id")
        if not media_id or not data.get("from_id"):
            raise ValueError("account, media_id or post_id, and from_id are required")
        object = "instagram" if data.get("media_id") else "page"
        verb = str(data.get("verb") or "add")
        with self._tx():
            self.account_upsert(id=account, object=object)
            created = (
                float(data["created_time"]) if data.get("created_time") is not None else _whole_seconds()
            )
            if verb != "add":
                return self._comment_change(data, account, verb)
            product = data.get("media_product_type")
            media = self.media_upsert(
                account=account,
                id=str(media_id),
                object=object,
                product_type=product,
                ad_id=data.get("ad_id"),
                created=(
                    float(data["media_created_time"])
                    if data.get("media_created_time") is not None
                    else created
                ),
            )
            parent_id = data.get("parent_id")
            if parent_id:
                parent = self._one("SELECT * FROM comments WHERE id = ?", str(parent_id))
                if parent is None or parent["media_id"] != media["id"]:
                    raise ValueError(f"parent {parent_id} is not a comment on {media_id}")
                if object == "instagram" and parent["parent_id"]:
                    parent_id = parent["parent_id"]  # Instagram threads are one level deep
            comment_id = str(data.get("id") or self._new_id(object, str(media_id)))
            name = data.get("from_name") or (
                self._one("SELECT name FROM accounts WHERE id = ?", account)["name"]
                if str(data["from_id"]) == account
                else f"user_test_{data['from_id']}"
            )
            self.db.execute(
                "INSERT INTO comments (id, account, object, media_id, parent_id, text, from_id, from_name,"
                " created, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    comment_id,
                    account,
                    object,
                    str(media_id),
                    parent_id,
                    str(data.get("text", "")),
                    str(data["from_id"]),
                    str(name),
                    created,
                    self._next("order"),
                ),
            )
            row = self._one("SELECT * FROM comments WHERE id = ?", comment_id)
        delivery = self._notify_comment(row, "add") if data.get("notify") else None
        return {"id": comment_id, **({"delivery": delivery} if delivery else {})}

    def _comment_change(self, data: dict, account: str, verb: str) -> dict:
        row = self._one("SELECT * FROM comments WHERE id = ? AND account = ?", str(data.get("id")), account)
        if row is None or row["object"] != "page":
            raise ValueError("a verb other than add needs the id of an existing Page comment")
        if verb == "edited":
            self.db.execute(
                "UPDATE comments SET text = ? WHERE id = ?", (str(data.get("text", "")), row["id"])
            )
        elif verb in ("hide", "unhide"):
            self.db.execute("UPDATE comments SET hidden = ? WHERE id = ?", (verb == "hide", row["id"]))
        elif verb == "remove":
            self.db.execute("UPDATE comments SET removed = 1 WHERE id = ?", (row["id"],))
        else:
            raise ValueError("verb is add, edited, remove, hide or unhide")
        row = self._one("SELECT * FROM comments WHERE id = ?", row["id"])
        delivery = self._notify_comment(row, verb) if data.get("notify") else None
        return {"id": row["id"], **({"delivery": delivery} if delivery else {})}

    def _new_id(self, object: str, parent: str, *, post: bool = False) -> str:
        """A fresh id in Meta's shape: Instagram media and comments 17 digits; a Page post
        `<page-id>_<16 digits>` (parent: the Page), a Page comment `<post-digits>_<16 digits>`
        (parent: the post). The next one no comment, media or post holds yet, since a caller
        may have chosen ids in the same space."""
        while True:
            n = self._next("id")
            if object == "instagram":
                new = f"179{n:014d}" if not post else f"178{n:014d}"
            else:
                new = f"{parent.split('_')[-1]}_{10**15 + n}"
            if (
                self._one("SELECT id FROM comments WHERE id = ?", new) is None
                and self._one("SELECT id FROM media WHERE id = ?", new) is None
            ):
                return new

    def _message_insert(
        self,
        *,
        object: str,
        account: str,
        sender: str,
        recipient: str,
        text: str,
        at_ms: int,
        metadata: str | None = None,
        comment_id: str | None = None,
        person_name: str | None = None,
    ) -> str:
        """Store one message of the account's conversation with a person; its id in Meta's shape."""
        person = recipient if sender == account else sender
        seq = self._next("order")
        mid = message_id(object, account, person, at_ms, seq)
        self.db.execute(
            "INSERT INTO messages (mid, account, sender, recipient, text, metadata, comment_id, created_ms,"
            " conversation, person, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                mid,
                account,
                sender,
                recipient,
                text,
                metadata,
                comment_id,
                at_ms,
                conversation_id(account, person, object),
                person,
                seq,
            ),
        )
        if person_name:
            self._set_kv(f"person:{account}:{person}", person_name)
        return mid

    def message_create(self, data: dict) -> dict:
        """An inbound DM (or, with `to_id` and `from_id` the account, one the account sent)."""
        account, sender = str(data["account"]), str(data["from_id"])
        with self._tx():
            row = self._one("SELECT * FROM accounts WHERE id = ?", account)
            if row is None:
                self.account_upsert(id=account, object=str(data.get("object", "instagram")))
                row = self._one("SELECT * FROM accounts WHERE id = ?", account)
            recipient = str(data.get("to_id") or account)
            if sender != account and recipient != account:
                raise ValueError("a message is from or to the account")
            at_ms = int(float(data.get("created_time", time.time())) * 1000)
            text = str(data.get("text", ""))
            mid = self._message_insert(
                object=row["object"],
                account=account,
                sender=sender,
                recipient=recipient,
                text=text,
                at_ms=at_ms,
                person_name=data.get("from_name") or data.get("to_name"),
            )
            conversation = self._one("SELECT conversation FROM messages WHERE mid = ?", mid)["conversation"]
        item = {
            "sender": {"id": sender},
            "recipient": {"id": recipient},
            "timestamp": at_ms,
            "message": {"mid": mid, "text": text, **({"is_echo": True} if sender == account else {})},
        }
        delivery = None
        field = "message_echoes" if sender == account and row["object"] == "page" else "messages"
        if data.get("notify") and self.subscribed(account, field):
            delivery = self._emit(row["object"], account, "messaging", item)
        return {"mid": mid, "conversation_id": conversation, **({"delivery": delivery} if delivery else {})}
