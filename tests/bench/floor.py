"""The bare Django floor `make bench` compares Conduit's ingest with: one view on the same gunicorn
settings that checks an HMAC-SHA256 over the body and writes its events with one
`INSERT ... ON CONFLICT` in autocommit. No middleware, no DRF, no ledger: the least a Django
webhook endpoint that keeps its events can do.

Served as `floor:application` (gunicorn `--pythonpath tests/bench`), on the database in
DATABASE_URL, with the secret in BENCH_FLOOR_SECRET; tests/bench/run.py creates its table.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os

import environ
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.urls import path

TABLE = "bench_floor_events"
# The one statement: a new event inserted, a repeat counted (its row's seen_count).
UPSERT = (
    f"INSERT INTO {TABLE} (event_key, doc) VALUES {{rows}} "
    f"ON CONFLICT (event_key) DO UPDATE SET seen_count = {TABLE}.seen_count + 1"
)
CREATE = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (event_key text PRIMARY KEY, doc text NOT NULL, "
    "seen_count integer NOT NULL DEFAULT 1)"
)
SIGNATURE = "X-Floor-Signature"


def signature(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def request(account: str, docs: list[dict], secret: str) -> bytes:
    """One delivery to the floor as raw HTTP/1.1: the same body Conduit gets, the floor's own HMAC."""
    body = json.dumps({"account": account, "events": docs}).encode()
    return (
        f"POST /floor/ HTTP/1.1\r\nHost: 127.0.0.1\r\n{SIGNATURE}: {signature(body, secret)}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def upsert(cursor, events: list[dict]) -> None:
    """The floor's write (and the raw one-statement baseline's): one multi-row upsert."""
    rows = ",".join(["(%s,%s)"] * len(events))
    params = [p for e in events for p in (f"floor:{e['id']}", json.dumps(e, separators=(",", ":")))]
    cursor.execute(UPSERT.format(rows=rows), params)


def receive(request: HttpRequest) -> HttpResponse:
    body = request.body
    if not hmac.compare_digest(request.headers.get(SIGNATURE, ""), signature(body, SECRET)):
        return _answer(401, b'{"error":"invalid_signature"}')
    try:
        events = json.loads(body)["events"]
    except (ValueError, KeyError, TypeError):
        return _answer(400, b'{"error":"invalid_body"}')
    with connection.cursor() as cursor:
        upsert(cursor, events)
    return _answer(200, b'{"ok":true}')


def _answer(status: int, content: bytes) -> HttpResponse:
    response = HttpResponse(content, status=status, content_type="application/json")
    response["Content-Length"] = str(len(content))  # no middleware sets it here
    return response


urlpatterns = [path("floor/", receive)]

SECRET = os.environ.get("BENCH_FLOOR_SECRET", "")
if not settings.configured and SECRET:
    database = environ.Env.db_url_config(os.environ["DATABASE_URL"])
    database["CONN_MAX_AGE"] = 600  # as the Conduit server in the bench
    settings.configure(
        DEBUG=False,
        SECRET_KEY="bench-floor-only-not-secret",
        ALLOWED_HOSTS=["127.0.0.1"],
        ROOT_URLCONF=__name__,
        DATABASES={"default": database},
        INSTALLED_APPS=[],
        MIDDLEWARE=[],
        USE_TZ=True,
    )
    application = get_wsgi_application()
