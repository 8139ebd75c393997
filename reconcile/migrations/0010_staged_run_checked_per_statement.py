"""A staged row's run is checked once per statement, not once per row.

A scan stages each page (a thousand events and their receipts) by COPY. As a
foreign key, `run_id` cost a lookup and a row lock per staged row at commit, about
half of a page's write. The same rule is now held by triggers:

- after each statement that writes staged rows, every run they name must exist,
  and is locked FOR KEY SHARE as a foreign key's check would lock it (PostgreSQL
  reads the statement's rows as a transition table; SQLite checks row by row);
- a run cannot be deleted, or its id changed, while staged rows name it (Django's
  CASCADE deletes them first, as before).

Both raise SQLSTATE 23503 (foreign_key_violation) on PostgreSQL and an integrity
error on SQLite, as the foreign key did.
"""

from django.db import migrations, models

STAGED = ("reconcile_stagedevent", "reconcile_stagedreceipt")
RUN = "reconcile_reconcilerun"

POSTGRES_CREATE = [
    f"""
    CREATE OR REPLACE FUNCTION conduit_staged_runs_exist() RETURNS trigger
    LANGUAGE plpgsql AS $$
    DECLARE
      missing bigint;
    BEGIN
      PERFORM 1 FROM {RUN} r WHERE r.id IN (SELECT DISTINCT n.run_id FROM staged_rows n)
        ORDER BY r.id FOR KEY SHARE OF r;
      SELECT n.run_id INTO missing FROM staged_rows n
        WHERE NOT EXISTS (SELECT 1 FROM {RUN} r WHERE r.id = n.run_id) LIMIT 1;
      IF FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
          MESSAGE = format('%s: run %s does not exist', TG_TABLE_NAME, missing);
      END IF;
      RETURN NULL;
    END
    $$
    """,
    f"""
    CREATE OR REPLACE FUNCTION conduit_run_keeps_staging() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
        RETURN NEW;
      END IF;
      IF EXISTS (SELECT 1 FROM {STAGED[0]} WHERE run_id = OLD.id)
         OR EXISTS (SELECT 1 FROM {STAGED[1]} WHERE run_id = OLD.id) THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
          MESSAGE = format('run %s still has staged rows', OLD.id);
      END IF;
      RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
    END
    $$
    """,
    *(f"""
    CREATE TRIGGER {table}_{op}_runs_exist AFTER {op} ON {table}
      REFERENCING NEW TABLE AS staged_rows FOR EACH STATEMENT
      EXECUTE FUNCTION conduit_staged_runs_exist()
    """ for table in STAGED for op in ("insert", "update")),
    f"""
    CREATE TRIGGER {RUN}_keeps_staging BEFORE DELETE OR UPDATE OF id ON {RUN}
      FOR EACH ROW EXECUTE FUNCTION conduit_run_keeps_staging()
    """,
]
POSTGRES_DROP = [
    f"DROP TRIGGER IF EXISTS {RUN}_keeps_staging ON {RUN}",
    *(f"DROP TRIGGER IF EXISTS {table}_{op}_runs_exist ON {table}" for table in STAGED for op in ("insert", "update")),
    "DROP FUNCTION IF EXISTS conduit_run_keeps_staging()",
    "DROP FUNCTION IF EXISTS conduit_staged_runs_exist()",
]

SQLITE_CREATE = [
    *(f"""
    CREATE TRIGGER {table}_{op}_runs_exist BEFORE {op} ON {table} FOR EACH ROW
      WHEN NOT EXISTS (SELECT 1 FROM {RUN} WHERE id = NEW.run_id)
    BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: the staged row''s run does not exist'); END
    """ for table in STAGED for op in ("insert", "update")),
    f"""
    CREATE TRIGGER {RUN}_delete_keeps_staging BEFORE DELETE ON {RUN} FOR EACH ROW
      WHEN EXISTS (SELECT 1 FROM {STAGED[0]} WHERE run_id = OLD.id)
        OR EXISTS (SELECT 1 FROM {STAGED[1]} WHERE run_id = OLD.id)
    BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: the run still has staged rows'); END
    """,
    f"""
    CREATE TRIGGER {RUN}_update_keeps_staging BEFORE UPDATE OF id ON {RUN} FOR EACH ROW
      WHEN NEW.id <> OLD.id AND (EXISTS (SELECT 1 FROM {STAGED[0]} WHERE run_id = OLD.id)
        OR EXISTS (SELECT 1 FROM {STAGED[1]} WHERE run_id = OLD.id))
    BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: the run still has staged rows'); END
    """,
]
SQLITE_DROP = [
    *(f"DROP TRIGGER IF EXISTS {table}_{op}_runs_exist" for table in STAGED for op in ("insert", "update")),
    f"DROP TRIGGER IF EXISTS {RUN}_delete_keeps_staging",
    f"DROP TRIGGER IF EXISTS {RUN}_update_keeps_staging",
]


def _run(statements: dict[str, list[str]]):
    def apply(apps, schema_editor):
        for sql in statements.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql, None)  # no parameters: format()'s %s stays as written
    return apply


def _run_field() -> models.ForeignKey:
    return models.ForeignKey(db_constraint=False, db_index=False, on_delete=models.CASCADE, related_name="+",
                             to="reconcile.reconcilerun")


class Migration(migrations.Migration):
    dependencies = [("reconcile", "0009_finding_report_index_folded")]

    operations = [
        migrations.AlterField(model_name="stagedevent", name="run", field=_run_field()),
        migrations.AlterField(model_name="stagedreceipt", name="run", field=_run_field()),
        migrations.RunPython(_run({"postgresql": POSTGRES_CREATE, "sqlite": SQLITE_CREATE}),
                             _run({"postgresql": POSTGRES_DROP, "sqlite": SQLITE_DROP})),
    ]
