"""The thin SQL helpers behave as the ORM does, and step aside for what they do not take."""

import pytest
from django.db.models import F

from conduit.sql import compare_and_set, increment_where, update_where
from ingress.models import Delivery
from tests.conftest import fixture_body


@pytest.fixture
def delivery(sandbox_source, deliver):
    deliver(fixture_body("comment__northstar"), delivery_id="msg_test_sql")
    return Delivery.objects.get()


def test_compare_and_set_matches_the_orm_and_refuses_what_it_does_not_take(delivery):
    moved = compare_and_set(Delivery, pk=delivery.pk, where={"seen_count": 1, "body_hash__gte": ""},
                            assign={"seen_count": F("seen_count") + 2})
    assert moved == 1
    assert compare_and_set(Delivery, pk=delivery.pk, where={"seen_count": 1}, assign={"seen_count": 9}) == 0
    delivery.refresh_from_db()
    assert delivery.seen_count == 3
    assert compare_and_set(Delivery, pk=delivery.pk, where={"seen_count__in": [3]}, assign={}) is None
    assert compare_and_set(Delivery, pk=delivery.pk, where={}, assign={"seen_count": F("id") + 1}) is None


def test_increment_and_update_where(delivery):
    assert increment_where(Delivery, counter="seen_count", where={"delivery_id": "msg_test_sql"},
                           assign={"last_received_at": delivery.last_received_at}) == 1
    assert update_where(Delivery, assign={"delivery_id": "msg_test_renamed"},
                        where={"delivery_id": "msg_test_sql"}) == 1
    assert Delivery.objects.get().seen_count == 2
    assert increment_where(Delivery, counter="seen_count", where={"delivery_id": "nope"}, assign={}) == 0
