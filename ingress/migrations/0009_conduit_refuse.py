"""conduit_refuse(detail): how ingest's one statement refuses a body (ingress.writes).

Raising inside the statement takes back everything it wrote, in one round trip.
PostgreSQL only: SQLite writes a body statement by statement and needs no function.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION conduit_refuse(detail text) RETURNS text
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'CDR01', MESSAGE = 'conduit: body refused', DETAIL = detail;
END
$$
"""
DROP = "DROP FUNCTION IF EXISTS conduit_refuse(text)"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("ingress", "0008_event_search_indexes")]

    operations = [migrations.RunPython(create, drop)]
