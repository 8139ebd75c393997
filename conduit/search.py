"""What a person types into a search box, answered from an index.

A reviewer types what they have in front of them: an event id (`evt_test_c1`), a comment or
message id, a post id, part of a key, a buyer's handle or words of the comment. Each word
typed (three characters or more) must appear somewhere in the row, in any case:

- in its identifiers: the event key (which holds the platform's event id), the post
  (`conversation_ref`) and the comment or message (`message_ref`), read through one
  trigram index on their joined text (`inbound_event_ids_trgm`, PostgreSQL's pg_trgm);
- or, only for a person with the content permission, in what the buyer wrote: the handle
  and the text, through a second trigram index (`inbound_event_words_trgm`).

A single token that is a whole id (an event key, the platform's event id, a comment or message
id, a post id) finds exactly the rows with that id, from each id's own index. The expressions
below are spelled exactly as the trigram indexes are (ingress migration 0023): PostgreSQL uses an
expression index only for the same expression. A term shorter than three characters has no
trigram: it finds only a whole id.
A reply key is hexadecimal and shown by its start (`short_key`): its part is a prefix, read
from the key's unique index as a range.
"""

from __future__ import annotations

import re

from django.db import connections, transaction
from django.db.models import F, Func, Q, QuerySet, TextField

from conduit.content import MESSAGE_CONTENT
from conduit.planner import planner_settings

MIN_SUBSTRING = 3  # pg_trgm indexes words of three characters and more
MAX_WORDS = 6  # more words than this add nothing a person would type, only index scans
_HEX = re.compile(r"[0-9a-f]{3,64}")

ID_COLUMNS = ("event_key", "conversation_ref", "message_ref")
WORD_COLUMNS = ("sender_handle", "message_text")


class Haystack(Func):
    """UPPER(a || ' ' || b ...): one row's searchable text, as its trigram index holds it."""

    template = "UPPER(%(expressions)s)"
    arg_joiner = " || ' ' || "
    output_field = TextField()


def haystack_sql(columns: tuple[str, ...]) -> str:
    """The index expression for `columns` (the migration creates the index from this)."""
    return "UPPER(" + " || ' ' || ".join(columns) + ")"


_TRIGRAM = re.compile(r"[^\W_]{3}")  # pg_trgm's trigrams are of letters and digits only


def words_of(term: str) -> list[str]:
    """The words of a search term that a trigram index can answer (three letters or digits in a
    row: "___" has no trigram, and would read the whole index), at most MAX_WORDS."""
    return [w for w in term.split() if _TRIGRAM.search(w)][:MAX_WORDS]


def cleaned(term: str) -> str:
    """A term as searched: stripped, without NUL (no PostgreSQL text holds one)."""
    return term.replace("\x00", "").strip()


def may_search_words(user) -> bool:
    """Words of the comment and handles are buyer content: searched only with its permission."""
    return user.has_perm(MESSAGE_CONTENT)


def events_matching(events: QuerySet, term: str, *, words: bool) -> QuerySet:
    """`events` (InboundEvent rows) holding every word of `term`; `words` also reads the content."""
    return _matching(events, term, words=words)[0]


def _matching(events: QuerySet, term: str, *, words: bool) -> tuple[QuerySet, bool]:
    """(the matching rows, whether they are read by substring: the trigram indexes)."""
    term = cleaned(term)
    if not term:
        return events, False
    if len(term.split()) == 1:
        # One token: first as a whole id (each from its own index), what a pasted id is; a part
        # of one, or a term too short for a trigram that is no whole id, is searched below.
        whole = events.filter(
            Q(event_key=term) | Q(source_event_id=term) | Q(message_ref=term) | Q(conversation_ref=term)
        )
        if whole.exists() or len(term) < MIN_SUBSTRING:
            return whole, False
    found = words_of(term)
    events = events.alias(_ids=Haystack(*(F(c) for c in ID_COLUMNS)))
    if words:
        events = events.alias(_words=Haystack(*(F(c) for c in WORD_COLUMNS)))
    for word in found:
        wanted = Q(_ids__contains=word.upper())
        if words:
            wanted |= Q(_words__contains=word.upper())
        events = events.filter(wanted)
    return events, True


FOUND_AT_MOST = 10_001  # a list page counts exactly up to 10,000 (conduit.admin)
WINDOW = 20_000  # the newest event ids, where a word of many comments is found
DENSE = 100  # matches among them that make a term dense: a page of them is near


def event_ids(events: QuerySet, term: str, *, words: bool) -> QuerySet | list[int]:
    """The ids of the events matching `term`, read with a plan that does not rest on the
    planner's guess of how many match (filter a list page with `pk__in=`).

    A whole id is read from its own index. A substring that is dense among the newest events (a
    word in many comments) is left to the planner, which reads the newest rows backwards and
    finds a page of them at once. A sparse one (a part of an id, a rare word) is read from the
    trigram indexes, newest first, at most FOUND_AT_MOST: PostgreSQL alone, guessing a few
    thousand matches, would read the primary key backwards for them, a second at a million
    events when they are all old (ids are made in time order, and so are their parts).
    """
    found, substring = _matching(events, term, words=words)
    if not substring:
        return found.values("id")
    newest = events.model.objects.order_by("-id").values_list("id", flat=True).first() or 0
    near = found.filter(id__gt=newest - WINDOW).order_by().values("id")[:DENSE].count()
    if near >= DENSE:
        return found.values("id")
    newest_first = found.order_by("-id").values_list("id", flat=True)[:FOUND_AT_MOST]
    connection = connections[events.db]
    if connection.vendor != "postgresql":
        return list(newest_first)
    # From the trigram indexes: neither the primary key backwards nor the whole table, for this
    # query only (a request's transaction goes on past it).
    with (
        transaction.atomic(using=events.db),
        planner_settings(connection, enable_indexscan="off", enable_seqscan="off"),
    ):
        return list(newest_first)


def reply_key_prefix(term: str) -> Q | None:
    """Reply keys starting with `term`, as a range of the key's unique index; None if `term`
    cannot start one. Between `term` and `term + "g"` lie exactly the hexadecimal keys that
    start with it, in any collation: each of their next characters sorts below "g"."""
    term = term.strip().lower()
    if not _HEX.fullmatch(term):
        return None
    return Q(reply_key__gte=term, reply_key__lt=term + "g")


def keyed_matching(
    rows: QuerySet, term: str, *, words: bool, events: QuerySet, event_field: str = "event_id"
) -> QuerySet:
    """`rows` of a ledger keyed by reply key and event key (reply actions, findings) whose reply
    key starts with `term` or whose event (`event_field` holds its key; `events` is the event
    ledger) matches it, or whose own event key is `term` (a finding's event may be one Conduit
    has not recorded)."""
    term = cleaned(term)
    if not term:
        return rows
    found = events.model.objects.filter(pk__in=event_ids(events, term, words=words)).values("event_key")
    by_event = Q(**{f"{event_field}__in": found})
    # Each branch from its own index: an OR of them in one WHERE reads every row.
    every = rows.model.objects.order_by()
    branches = [every.filter(by_event), every.filter(**{event_field: term})]
    by_key = reply_key_prefix(term)
    if by_key is not None:
        branches.append(every.filter(by_key))
    first, *rest = (branch.values("pk") for branch in branches)
    return rows.filter(pk__in=first.union(*rest))


class PersonSearchMixin:
    """An admin whose search box reads `search_rows`: what a person types, never a whole-table scan.

    `search_fields` only makes Django draw the box; `search_help_text` says what it finds."""

    search_fields = ("pk",)
    search_help_text = (
        "An event, comment, message or post id, part of a key, or a handle or words of the comment."
    )

    def search_rows(self, queryset: QuerySet, term: str, *, words: bool) -> QuerySet:
        raise NotImplementedError

    def get_search_results(self, request, queryset, search_term):
        if not cleaned(search_term):
            return queryset, False
        return self.search_rows(queryset, search_term, words=may_search_words(request.user)), False
