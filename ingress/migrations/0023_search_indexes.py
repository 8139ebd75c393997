"""The event ledger's search indexes, built without blocking ingest (CREATE INDEX CONCURRENTLY,
outside a transaction): two GIN trigram indexes answering what a person types (conduit.search:
one over the event's identifiers, one over its handle and text, their expressions spelled as the
queries spell them), and a post's events by person (a post id searched whole, the inbox's
earlier comments)."""

from django.db import migrations, models

from conduit.storage import vendor_sql

# As conduit.search.haystack_sql spells them (tests/console/test_search.py holds the two equal).
INDEXES = (
    ("inbound_event_ids_trgm", "UPPER(event_key || ' ' || conversation_ref || ' ' || message_ref)"),
    ("inbound_event_words_trgm", "UPPER(sender_handle || ' ' || message_text)"),
)
POST_SENDER = 'CREATE INDEX {how} IF NOT EXISTS "inbound_event_post_sender" ON "inbound_events" ("conversation_ref", "sender_ref")'


def create(vendor: str) -> list[str]:
    if vendor == "sqlite":
        return [POST_SENDER.format(how="")]
    return [
        *(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON inbound_events USING gin ({expression} gin_trgm_ops)"
            for name, expression in INDEXES
        ),
        POST_SENDER.format(how="CONCURRENTLY"),
    ]


def drop(vendor: str) -> list[str]:
    how = "CONCURRENTLY " if vendor == "postgresql" else ""
    names = [name for name, _ in INDEXES] if vendor == "postgresql" else []
    return [f"DROP INDEX {how}IF EXISTS {name}" for name in (*names, "inbound_event_post_sender")]


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [
        ("ingress", "0022_state_labels"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddIndex(
                    model_name="inboundevent",
                    index=models.Index(
                        fields=["conversation_ref", "sender_ref"], name="inbound_event_post_sender"
                    ),
                ),
            ],
            database_operations=[vendor_sql(create, drop)],
        ),
    ]
