"""CONDUIT_DB_POOL: Django's psycopg connection pool."""
