"""Graph writes: public replies on a comment's thread and private replies to a comment's author."""

from __future__ import annotations

import time

from simulators.meta.errors import GraphError, not_found

PRIVATE_REPLY_WINDOW = 7 * 24 * 3600


class Writes:
    """SimulatorState's writes, and what they applied (counted per comment)."""

    def applied(self) -> dict:
        with self.lock:
            rows = self._all("SELECT * FROM applied")
        result: dict[str, dict[str, int]] = {"public": {}, "private": {}}
        for row in rows:
            result[row["kind"]][row["comment_id"]] = row["n"]
        return result

    def private_replied(self, comment_id: str) -> bool:
        """Whether a private reply to this comment was applied."""
        with self.lock:
            return (
                self._one("SELECT n FROM applied WHERE kind = 'private' AND comment_id = ?", comment_id)
                is not None
            )

    def _count_applied(self, kind: str, comment_id: str) -> None:
        self.db.execute(
            "INSERT INTO applied (kind, comment_id, n) VALUES (?, ?, 1) "
            "ON CONFLICT(kind, comment_id) DO UPDATE SET n = n + 1",
            (kind, comment_id),
        )

    def public_reply(self, *, comment_id: str, message: str, host: str) -> dict:
        """Reply on the comment's thread as the account; a reply to a reply lands on the top level."""
        with self._tx():
            target = self._one("SELECT * FROM comments WHERE id = ? AND removed = 0", comment_id)
            if target is None:
                raise not_found(comment_id)
            media = self._one("SELECT * FROM media WHERE id = ?", target["media_id"])
            if target["hidden"] or media["product_type"] == "LIVE":
                raise GraphError(100, message="(#100) This comment cannot be replied to.")
            if not message:
                raise GraphError(100, message="(#100) The parameter message is required")
            top = target["parent_id"] or target["id"]
            new_id = self._new_id(target["object"], target["media_id"])
            account = target["account"]
            self.db.execute(
                "INSERT INTO comments (id, account, object, media_id, parent_id, text, from_id, from_name,"
                " created, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    new_id,
                    account,
                    target["object"],
                    target["media_id"],
                    top,
                    message,
                    account,
                    self._one("SELECT name FROM accounts WHERE id = ?", account)["name"],
                    time.time(),
                    self._next("order"),
                ),
            )
            self._count_applied("public", comment_id)
            row = self._one("SELECT * FROM comments WHERE id = ?", new_id)
        self._notify_comment(row, "add", background=True)  # the account's own comments are notified too
        return {"id": new_id}

    def private_reply(self, *, node: str, host: str, body: dict) -> dict:
        recipient = body.get("recipient") or {}
        message = body.get("message") or {}
        comment_id = str(recipient.get("comment_id") or "")
        text = str(message.get("text") or "")
        if not comment_id or not text:
            raise GraphError(
                100, message="(#100) The parameter recipient.comment_id and message.text are required"
            )
        metadata = message.get("metadata")
        with self._tx():
            comment = self._one("SELECT * FROM comments WHERE id = ? AND removed = 0", comment_id)
            sender = self._one("SELECT * FROM accounts WHERE id = ?", node)
            if sender is not None and host == "facebook" and sender["object"] == "instagram":
                # Instagram through Facebook Login sends from the Page node; Meta answers the IG
                # node on graph.facebook.com with (#3), as recorded on every such private reply.
                raise GraphError(3)
            if comment is None or sender is None:
                raise not_found(comment_id if sender else node)
            owner = comment["account"]
            # A Page token sends for the Page and for the Instagram account linked to it.
            linked = self._one("SELECT * FROM accounts WHERE id = ?", owner)
            if node != owner and not (linked and linked["page_id"] == node):
                raise GraphError(
                    100, subcode=2534025, message="(#100) The comment is not valid for a private reply"
                )
            messenger = comment["object"] == "page"
            if comment["from_id"] == owner:
                raise GraphError(
                    100, subcode=2534025, message="(#100) The comment is not valid for a private reply"
                )
            if time.time() - comment["created"] > PRIVATE_REPLY_WINDOW:
                raise GraphError(
                    10,
                    subcode=2018278 if messenger else 2534022,
                    message="(#10) This message is sent outside of allowed window.",
                )
            if self._one("SELECT n FROM applied WHERE kind = 'private' AND comment_id = ?", comment_id):
                raise GraphError(10900, message="(#10900) Activity already replied to")
            at_ms = int(time.time() * 1000)
            # The answer's message_id is the message's id in the conversation with the commenter.
            mid = self._message_insert(
                object=comment["object"],
                account=owner,
                sender=owner,
                recipient=comment["from_id"],
                text=text,
                at_ms=at_ms,
                metadata=None if metadata is None else str(metadata),
                comment_id=comment_id,
                person_name=comment["from_name"],
            )
            self._count_applied("private", comment_id)
        echo = {"mid": mid, "text": text, "is_echo": True}
        if messenger:
            # Messenger echoes carry the app and the metadata, and need message_echoes.
            echo["app_id"] = self.app_id or ""
            if metadata is not None:
                echo["metadata"] = str(metadata)
            field = "message_echoes"
        else:
            # Instagram: echoes arrive inside `messages`; metadata is undocumented there, so
            # the simulator does not echo it (Conduit must not rely on it).
            field = "messages"
        if self.subscribed(owner, field):
            self._emit(
                comment["object"],
                owner,
                "messaging",
                {
                    "sender": {"id": owner},
                    "recipient": {"id": comment["from_id"]},
                    "timestamp": at_ms,
                    "message": echo,
                },
                background=True,
            )
        return {"recipient_id": comment["from_id"], "message_id": mid}
