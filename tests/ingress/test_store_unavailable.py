"""The store unavailable during ingest: 503 with Retry-After, and nothing half-written."""

import psycopg
import pytest
from django.db import connection

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


@pytest.mark.django_db(transaction=True)
def test_database_killed_mid_transaction_is_503_and_zero_rows(sandbox_source, deliver, monkeypatch):
    from ingress import services

    planned = services.reply_actions_plan

    def plan_after_losing_the_database(**kwargs):
        # The event row is already inserted in this transaction; now the server
        # side of the connection dies, as in a failover or an OOM kill.
        pid = connection.connection.info.backend_pid
        s = connection.settings_dict
        with psycopg.connect(
            host=s["HOST"], port=s["PORT"], user=s["USER"], dbname=s["NAME"], autocommit=True
        ) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        return planned(**kwargs)

    monkeypatch.setattr(services, "reply_actions_plan", plan_after_losing_the_database)
    assert_retryable(deliver(fixture_body("comment__northstar")))
    assert counts() == [0, 0, 0, 0, 0, 0]

    # When the store is back, the provider's retry is accepted normally.
    monkeypatch.setattr(services, "reply_actions_plan", planned)
    assert deliver(fixture_body("comment__northstar")).status_code == 200
    assert counts()[:3] == [1, 2, 2]


@pytest.mark.django_db(transaction=True)
def test_database_unreachable_is_503_and_zero_rows(sandbox_source, deliver, monkeypatch):
    connection.close()
    monkeypatch.setitem(connection.settings_dict, "PORT", "1")  # nothing listens there
    assert_retryable(deliver(fixture_body("comment__northstar")))
    connection.close()
    monkeypatch.undo()
    assert counts() == [0, 0, 0, 0, 0, 0]
