"""planner_settings: the settings hold for the block's statements only, and a failure inside is
the block's own error, not one of putting the settings back."""

import pytest
from django.db import DatabaseError, connection, transaction

from conduit.planner import planner_settings

pytestmark = pytest.mark.django_db(transaction=True)


def _setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting(%s)", [name])
        return cursor.fetchone()[0]


def test_the_settings_hold_inside_the_block_and_what_was_before_comes_back():
    session = _setting("work_mem")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL work_mem = '12MB'")  # a transaction's own, not the session's
        with planner_settings(connection, enable_nestloop="off", work_mem="48MB"):
            assert (_setting("enable_nestloop"), _setting("work_mem")) == ("off", "48MB")
        assert (_setting("enable_nestloop"), _setting("work_mem")) == ("on", "12MB")
    assert _setting("work_mem") == session  # and none of it outlives the transaction


def test_a_block_that_fails_the_transaction_raises_its_own_error():
    with pytest.raises(DatabaseError, match="division by zero"):
        with transaction.atomic(), planner_settings(connection, enable_seqscan="off"):
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1 / 0")


def test_a_block_django_marked_for_rollback_raises_its_own_error():
    # An error inside atomic(savepoint=False) (as bulk_create's and save's) leaves PostgreSQL's
    # transaction healthy but Django's marked for rollback: no statement may run in it.
    with pytest.raises(LookupError, match="the block's own"):
        with transaction.atomic(), planner_settings(connection, enable_seqscan="off"):
            with transaction.atomic(savepoint=False):
                raise LookupError("the block's own")


def test_a_python_error_in_the_block_still_puts_the_settings_back():
    with transaction.atomic():
        with pytest.raises(LookupError), planner_settings(connection, enable_hashjoin="off"):
            raise LookupError("not the database's")
        assert _setting("enable_hashjoin") == "on"


def test_outside_a_transaction_it_refuses_rather_than_set_nothing():
    with pytest.raises(transaction.TransactionManagementError, match="needs a transaction"):
        with planner_settings(connection, enable_nestloop="off"):
            pass
