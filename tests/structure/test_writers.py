"""One writer per table: no app writes a model of another app (it asks the owner's service or a
hook the owner's AppConfig.ready registers).

The check parses the apps' modules (ast) and finds writes of a named model: `<Model>.objects...`
ending in a write (update, create, delete...), the ORM's `.save()` of an instance built or read
from `<Model>`, conduit.sql's writers (`insert_rows(<Model>, ...)`), the state machine's
(`transition(model=<Model>, history=<Model>)`), and raw SQL (`UPDATE`, `INSERT INTO`,
`DELETE FROM`) naming a model's table, literally or as `<Model>._meta.db_table`. Writes through
a model held in a variable (`plan.model`) are not seen: the owner's module names its own models.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from django.apps import apps

ROOT = Path(__file__).resolve().parents[2]
APPS = ("ingress", "replies", "reconcile", "console")
ORM_WRITES = {"update", "create", "bulk_create", "bulk_update", "delete", "get_or_create", "update_or_create"}
SQL_WRITERS = {"insert_rows", "update_rows", "upsert_counting", "upsert_sql", "columns_sql"}
STATE_WRITERS = {"transition", "transition_many", "record_created"}
SQL_WRITE = re.compile(r"\b(?:UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+\"?(\w+)\"?", re.IGNORECASE)
SQL_WRITE_TAIL = re.compile(r"\b(?:UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+\"?$", re.IGNORECASE)

# Writes across apps still made, each with its reason: (module, model). None: the acceptance
# proof's scenes (a source connected a day ago, an action due now) are the testkit's, beside the
# house (simulators/testkit/scenes.py), like a test's own set-up.
ALLOWED: set[tuple[str, str]] = set()


def owners() -> tuple[dict[str, str], dict[str, str]]:
    """{model class name: app label}, {db_table: app label} for the apps' models."""
    models = [m for m in apps.get_models(include_auto_created=True) if m._meta.app_label in APPS]
    return (
        {m.__name__: m._meta.app_label for m in models},
        {m._meta.db_table: m._meta.app_label for m in models},
    )


def _root_model(node: ast.AST, by_name: dict[str, str]) -> str | None:
    """The model a call chain starts from: `Model.objects.filter(...).update` -> Model."""
    while True:
        if isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Attribute):
            if node.attr == "objects" and isinstance(node.value, ast.Name) and node.value.id in by_name:
                return node.value.id
            node = node.value
        else:
            return None


def _table_of(node: ast.AST, by_name: dict[str, str]) -> str | None:
    """`Model._meta.db_table` (possibly inside qn(...)) -> Model."""
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Attribute)
            and sub.attr == "db_table"
            and isinstance(sub.value, ast.Attribute)
            and sub.value.attr == "_meta"
            and isinstance(sub.value.value, ast.Name)
            and sub.value.value.id in by_name
        ):
            return sub.value.value.id
    return None


def writes_in(
    source: str, app: str, by_name: dict[str, str], by_table: dict[str, str]
) -> list[tuple[int, str]]:
    """(line, model or table) of each write in `source` of a model another app than `app` owns."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(source)

    def foreign(name: str | None, table: bool = False) -> bool:
        owner = (by_table if table else by_name).get(name or "")
        return owner is not None and owner != app

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ORM_WRITES:
                model = _root_model(func.value, by_name)
                if foreign(model):
                    found.append((node.lineno, model))
            name = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if (
                name in SQL_WRITERS
                and node.args
                and isinstance(node.args[0], ast.Name)
                and name != "columns_sql"
                and foreign(node.args[0].id)
            ):
                found.append((node.lineno, node.args[0].id))
            if name in STATE_WRITERS:
                for keyword in node.keywords:
                    if (
                        keyword.arg in ("model", "history")
                        and isinstance(keyword.value, ast.Name)
                        and foreign(keyword.value.id)
                    ):
                        found.append((node.lineno, keyword.value.id))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            for table in SQL_WRITE.findall(node.value):
                if foreign(table, table=True):
                    found.append((node.lineno, table))
        elif isinstance(node, ast.JoinedStr):
            parts = node.values
            for before, value in zip(parts, parts[1:]):
                if (
                    isinstance(before, ast.Constant)
                    and isinstance(value, ast.FormattedValue)
                    and SQL_WRITE_TAIL.search(before.value)
                ):
                    model = _table_of(value, by_name)
                    if foreign(model):
                        found.append((node.lineno, model))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # `x = Model(...)` or `x = Model.objects.get(...)`, then `x.save()`.
            held: dict[str, str] = {}
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Assign)
                    and len(sub.targets) == 1
                    and isinstance(sub.targets[0], ast.Name)
                    and isinstance(sub.value, ast.Call)
                ):
                    func = sub.value.func
                    model = (
                        func.id
                        if isinstance(func, ast.Name) and func.id in by_name
                        else _root_model(sub.value, by_name)
                    )
                    if model:
                        held[sub.targets[0].id] = model
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Call)
                    and isinstance(sub.func, ast.Attribute)
                    and sub.func.attr == "save"
                    and isinstance(sub.func.value, ast.Name)
                    and foreign(held.get(sub.func.value.id))
                ):
                    found.append((sub.lineno, held[sub.func.value.id]))
    return sorted(set(found))


def cross_app_writes() -> set[tuple[str, str]]:
    by_name, by_table = owners()
    found = set()
    # The platform packages own no table: every write they make is another app's.
    for app in (*APPS, "platforms"):
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for line, model in writes_in(path.read_text(), app, by_name, by_table):
                found.add((f"{path.relative_to(ROOT)}:{line}", model))
    return found


def test_each_table_has_one_writer_app():
    found = {(where.split(":")[0], model) for where, model in cross_app_writes()}
    assert found == ALLOWED, sorted(cross_app_writes())


def test_positive_control_a_planted_cross_app_write_is_reported(tmp_path):
    """Every spelling the check knows, planted in a replies module: each is reported."""
    planted = tmp_path / "planted_cross_write.py"
    planted.write_text(
        "from ingress.models import InboundEvent, Source\n"
        "def stop(source_id):\n"
        "    Source.objects.filter(pk=source_id, needs_reauth=False).update(needs_reauth=True)\n"
        "    InboundEvent.objects.create(event_key='k')\n"
        "    insert_rows(InboundEvent, ['event_key'], [('k',)])\n"
        "    source = Source.objects.get(pk=source_id)\n"
        "    source.save()\n"
        "    cursor.execute('UPDATE ingress_source SET needs_reauth = true')\n"
        "    cursor.execute(f'DELETE FROM {qn(Source._meta.db_table)} WHERE id = %s', [source_id])\n"
        "    transition(model=InboundEvent, pk=1)\n"
    )
    by_name, by_table = owners()
    assert writes_in(planted.read_text(), "replies", by_name, by_table) == [
        (3, "Source"),
        (4, "InboundEvent"),
        (5, "InboundEvent"),
        (7, "Source"),
        (8, "ingress_source"),
        (9, "Source"),
        (10, "InboundEvent"),
    ]
    # The owner writing its own tables is no finding.
    assert writes_in(planted.read_text(), "ingress", by_name, by_table) == []
