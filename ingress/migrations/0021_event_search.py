"""An event keeps its author's handle (content, purged with the text); pg_trgm for its search.

The search's indexes are built by migration 0023, without blocking ingest. pg_trgm is a trusted
extension (PostgreSQL 13+): the database's owner creates it. SQLite, the demo's database,
searches without it.
"""

from django.db import migrations

import conduit.content
from conduit.references import Reference, sqlite_table_remade
from conduit.storage import vendor_sql


def create(vendor: str) -> list[str]:
    return ["CREATE EXTENSION IF NOT EXISTS pg_trgm"] if vendor == "postgresql" else []


def drop(vendor: str) -> list[str]:
    return []  # the extension may serve others; it stays


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
