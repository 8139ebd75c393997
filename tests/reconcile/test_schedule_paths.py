"""The schedule rows name tasks that import, and the rename migration moves an old row."""

import importlib

import pytest
from django.apps import apps
from django.utils.module_loading import import_string
from django_q.models import Schedule

rename = importlib.import_module("reconcile.migrations.0015_subscriptions_check_renamed")

pytestmark = pytest.mark.django_db


def test_every_schedule_row_names_a_task_that_imports():
    funcs = list(Schedule.objects.values_list("func", flat=True))
    assert rename.NEW in funcs
    for func in funcs:
        assert callable(import_string(func)), func


def test_the_rename_moves_an_old_row_forwards_and_back():
    Schedule.objects.filter(func=rename.NEW).update(func=rename.OLD)
    rename.forwards(apps, None)
    assert not Schedule.objects.filter(func=rename.OLD).exists()
    assert Schedule.objects.filter(func=rename.NEW).count() == 1
    rename.backwards(apps, None)
    assert Schedule.objects.filter(func=rename.OLD).count() == 1
    assert not Schedule.objects.filter(func=rename.NEW).exists()
