"""The store unavailable during ingest: 503 with Retry-After, and nothing half-written."""

import threading
import time

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from ingress.models import Delivery, EventTransition, InboundEvent, QuarantineReceipt
from replies.models import ReplyAction, ReplyTransition
from tests.conftest import fixture_body

LEDGERS = (InboundEvent, EventTransition, ReplyAction, ReplyTransition, Delivery, QuarantineReceipt)


def counts() -> list[int]:
    connection.close()  # the request may have left a dead connection behind
    return [model.objects.count() for model in LEDGERS]


def assert_retryable(response) -> None:
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json()["code"] == "store_unavailable"


def _admin():
    s = connection.settings_dict
    return psycopg.connect(host=s["HOST"], port=s["PORT"], user=s["USER"], dbname=s["NAME"], autocommit=True)


@pytest.mark.django_db(transaction=True)
def test_database_killed_mid_statement_is_503_and_zero_rows(sandbox_source, deliver):
    """The body's one statement has written its delivery row and waits on its event's key (another
    transaction holds it, uncommitted); then its server process dies, as in a failover or an OOM kill."""
    from django.db import connection as main_connection

    from conduit.providers.registry import get_adapter
    from ingress.selectors import source_config
    from ingress.services import observations_accept

    body = fixture_body("comment__northstar")
    parsed = get_adapter("sandbox-social").parse_delivery(body=body, config=source_config(sandbox_source))
    holding, release, blocker_pid, killed = threading.Event(), threading.Event(), [], []

    def hold_the_key():  # its own connection: a concurrent first sighting of the same event
        from django.db import connection as own
        from django.db import transaction

        try:
            with transaction.atomic():
                observations_accept(
                    source=sandbox_source,
                    parsed=parsed,
                    delivery_id="msg_test_other",
                    body_hash="0" * 64,
                    body_bytes=len(body),
                    now=timezone.now(),
                )
                blocker_pid.append(own.connection.info.backend_pid)
                holding.set()
                release.wait(30)
                raise RuntimeError("taken back")
        except RuntimeError:
            pass
        finally:
            own.close()

    def kill_the_waiter():
        holding.wait(30)
        with _admin() as admin:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                waiting = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> %s "
                    "AND datname = current_database()",
                    [blocker_pid[0]],
                ).fetchall()
                if waiting:
                    killed.append(
                        admin.execute("SELECT pg_terminate_backend(%s)", [waiting[0][0]]).fetchone()[0]
                    )
                    break
                time.sleep(0.05)
        release.set()

    threads = [threading.Thread(target=hold_the_key), threading.Thread(target=kill_the_waiter)]
    threads[0].start()
    assert holding.wait(30)
    threads[1].start()
    response = deliver(body)
    for thread in threads:
        thread.join(30)
    assert killed == [True]  # the request's statement was waiting on the key when it died
    assert_retryable(response)
    main_connection.close()
    assert counts() == [0, 0, 0, 0, 0, 0]

    # When the store is back, the provider's retry is accepted normally.
    assert deliver(body).status_code == 200
    assert counts()[:3] == [1, 2, 2]


@pytest.mark.django_db(transaction=True)
def test_database_unreachable_is_503_and_zero_rows(sandbox_source, deliver, monkeypatch):
    connection.close()
    monkeypatch.setitem(connection.settings_dict, "PORT", "1")  # nothing listens there
    assert_retryable(deliver(fixture_body("comment__northstar")))
    connection.close()
    monkeypatch.undo()
    assert counts() == [0, 0, 0, 0, 0, 0]
