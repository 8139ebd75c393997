"""The state's reads: what an id names, conversations, messages, media and readable comments."""

from __future__ import annotations

import sqlite3


class Reads:
    """SimulatorState's reads, each under the state's lock."""

    def find(self, node: str) -> tuple[str, sqlite3.Row] | None:
        """What an id names: ("account"|"media"|"comment"|"message"|"conversation", row); a message
        and a conversation row carry their account's `object`."""
        with self.lock:
            for kind, table in (("account", "accounts"), ("media", "media"), ("comment", "comments")):
                row = self._one(f"SELECT * FROM {table} WHERE id = ?", node)
                if row is not None and not (kind == "comment" and row["removed"]):
                    return kind, row
            row = self._one(
                "SELECT m.*, a.object FROM messages m JOIN accounts a ON a.id = m.account WHERE m.mid = ?",
                node,
            )
            if row is not None:
                return "message", row
            row = self._one(
                "SELECT m.account, m.person, m.conversation, a.object FROM messages m "
                "JOIN accounts a ON a.id = m.account WHERE m.conversation = ? LIMIT 1",
                node,
            )
            if row is not None:
                return "conversation", row
        return None

    def conversations(self, accounts: list[str], person: str | None = None) -> list[dict]:
        """The accounts' conversations as rows for paging: {id, account, person, object, created
        (the last message's time, seconds), seq}."""
        with self.lock:
            marks = ",".join("?" * len(accounts)) or "NULL"
            rows = self._all(
                "SELECT m.conversation, m.account, m.person, a.object, MAX(m.created_ms) AS last_ms,"
                " MAX(m.seq) AS seq FROM messages m JOIN accounts a ON a.id = m.account"
                f" WHERE m.account IN ({marks}) AND (? IS NULL OR m.person = ?)"
                " GROUP BY m.conversation, m.account, m.person, a.object",
                *accounts,
                person,
                person,
            )
        return [
            {
                "id": r["conversation"],
                "account": r["account"],
                "person": r["person"],
                "object": r["object"],
                "created": r["last_ms"] / 1000,
                "seq": r["seq"],
            }
            for r in rows
        ]

    def conversation_messages(self, conversation: str) -> list[dict]:
        """A conversation's messages, newest first, with their rank (0: the newest)."""
        with self.lock:
            rows = self._all(
                "SELECT m.*, a.object FROM messages m JOIN accounts a ON a.id = m.account "
                "WHERE m.conversation = ? ORDER BY m.created_ms DESC, m.seq DESC",
                conversation,
            )
        return [{**dict(r), "created": r["created_ms"] / 1000, "rank": i} for i, r in enumerate(rows)]

    def message_rank(self, row: sqlite3.Row) -> int:
        """How many newer messages its conversation holds (0: the newest)."""
        with self.lock:
            return self._one(
                "SELECT COUNT(*) AS n FROM messages WHERE conversation = ? AND "
                "(created_ms > ? OR (created_ms = ? AND seq > ?))",
                row["conversation"],
                row["created_ms"],
                row["created_ms"],
                row["seq"],
            )["n"]

    def person_name(self, account: str, person: str) -> str:
        """A person's display name in an account's conversation: the one a comment or DM gave."""
        with self.lock:
            name = self._kv(f"person:{account}:{person}", "")
            if not name:
                row = self._one(
                    "SELECT from_name FROM comments WHERE account = ? AND from_id = ? LIMIT 1",
                    account,
                    person,
                )
                name = row["from_name"] if row else f"user_test_{person}"
        return name

    def media_list(self, account: str, since: float | None, until: float | None) -> list[sqlite3.Row]:
        with self.lock:
            rows = self._all("SELECT * FROM media WHERE account = ?", account)
        return [
            r
            for r in rows
            if (since is None or r["created"] >= since) and (until is None or r["created"] < until)
        ]

    def comment_rows(self, *, media_id: str | None = None, parent_id: str | None = None) -> list[sqlite3.Row]:
        """Readable comments: not removed, and (Meta) never those on live media or ads."""
        with self.lock:
            if media_id is not None:
                rows = self._all(
                    "SELECT c.* FROM comments c JOIN media m ON m.id = c.media_id "
                    "WHERE c.media_id = ? AND c.removed = 0 AND m.product_type != 'LIVE' "
                    "AND m.ad_id IS NULL",
                    media_id,
                )
            else:
                rows = self._all(
                    "SELECT c.* FROM comments c JOIN media m ON m.id = c.media_id "
                    "WHERE c.parent_id = ? AND c.removed = 0 AND m.product_type != 'LIVE' "
                    "AND m.ad_id IS NULL",
                    parent_id,
                )
        return rows

    def media_row(self, media_id: str) -> sqlite3.Row | None:
        with self.lock:
            return self._one("SELECT * FROM media WHERE id = ?", media_id)

    def account_name(self, account: str) -> str:
        row = self.account(account)
        return row["name"] if row else account
