"""An event keeps its author's handle (content, purged with the text), and is searched by trigrams.

Two GIN trigram indexes (pg_trgm) answer what a person types (conduit.search): one over the
event's identifiers, one over its handle and text. Their expressions are conduit.search's,
as the queries spell them. pg_trgm is a trusted extension (PostgreSQL 13+): the
database's owner creates it. SQLite, the demo's database, searches without them.
"""

from django.db import migrations

import conduit.content
from conduit.references import Reference, sqlite_table_remade
from conduit.storage import vendor_sql

# As conduit.search.haystack_sql spells them (tests/ingress/test_search.py holds the two equal).
INDEXES = (
    ("inbound_event_ids_trgm", "UPPER(event_key || ' ' || conversation_ref || ' ' || message_ref)"),
    ("inbound_event_words_trgm", "UPPER(sender_handle || ' ' || message_text)"),
)


def create(vendor: str) -> list[str]:
    if vendor != "postgresql":
        return []
    return ["CREATE EXTENSION IF NOT EXISTS pg_trgm"] + [
        f"CREATE INDEX {name} ON inbound_events USING gin ({expression} gin_trgm_ops)"
        for name, expression in INDEXES
    ]


def drop(vendor: str) -> list[str]:
    return [f"DROP INDEX IF EXISTS {name}" for name, _ in INDEXES] if vendor == "postgresql" else []


class Migration(migrations.Migration):
    dependencies = [
        ("ingress", "0020_source_keywords_moved_to_campaigns"),
    ]

    operations = [
        *sqlite_table_remade(
            Reference("inbound_event_transitions", "event_id", "inbound_events"),
            operations=[
                migrations.AddField(
                    model_name="inboundevent",
                    name="sender_handle",
                    field=conduit.content.ContentField(blank=True, db_default=""),
                ),
            ],
        ),
        vendor_sql(create, drop),
    ]
