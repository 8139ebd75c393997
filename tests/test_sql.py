"""The thin SQL helpers behave as the ORM does, and step aside for what they do not take."""

import pytest
from django.db.models import F

from conduit.sql import Unsupported, update_rows
from ingress.models import Delivery
from tests.conftest import fixture_body


@pytest.fixture
def delivery(sandbox_source, deliver):
    deliver(fixture_body("comment__northstar"), delivery_id="msg_test_sql")
    return Delivery.objects.get()


def test_update_rows_compares_sets_and_increments_like_the_orm(delivery):
    moved = update_rows(Delivery, where={"pk": delivery.pk, "seen_count": 1, "body_hash__gte": ""},
                        assign={"seen_count": F("seen_count") + 2, "delivery_id": "msg_test_renamed"})
    assert moved == 1
    assert update_rows(Delivery, where={"pk": delivery.pk, "seen_count": 1}, assign={"seen_count": 9}) == 0
    assert update_rows(Delivery, where={"delivery_id": "nope"}, assign={"seen_count": F("seen_count") + 1}) == 0
    delivery.refresh_from_db()
    assert (delivery.seen_count, delivery.delivery_id) == (3, "msg_test_renamed")


@pytest.mark.parametrize(
    "where, assign",
    [
        ({"seen_count__in": [3]}, {"seen_count": 1}),
        ({"pk": 1}, {"seen_count": F("id") + 1}),
        ({"last_received_at__lt": None}, {"seen_count": 1}),
        ({}, {"seen_count": 1}),  # never an UPDATE of every row
    ],
)
def test_update_rows_refuses_what_it_does_not_take(delivery, where, assign):
    with pytest.raises(Unsupported):
        update_rows(Delivery, where=where, assign=assign)
    delivery.refresh_from_db()
    assert delivery.seen_count == 1
