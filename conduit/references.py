"""References checked once per statement: a foreign key's rule for tables written a set at a time.

PostgreSQL checks a foreign key with one lookup and one row lock per written row.
A table written a generation at a time (a scan's staged pages, a report's findings,
the history of a whole set's reconcile marks) pays that for every row, at commit.
A `Reference` holds the same rule with triggers the migrations create:

- after each statement that inserts or updates referring rows, every row they refer
  to must exist, and is locked FOR KEY SHARE, as the key's own check locks it
  (PostgreSQL reads the statement's rows as a transition table). A row whose current
  version this transaction wrote itself is not locked again: a concurrent delete
  already waits for this transaction (reconcile's evidence mark updates each event
  and writes its history in one statement);
- a referred-to row cannot be deleted, nor its key changed, while rows refer to it
  (Django's on_delete runs before the delete, as with the key).

Both raise SQLSTATE 23503 (foreign_key_violation), an IntegrityError as the key's was.
SQLite, the embedded default, checks row by row. A NULL refers to nothing.
Migrations call these at the time they run: a change to the SQL here reaches an
existing database only through a new migration that creates the triggers again.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import migrations


@dataclass(frozen=True)
class Reference:
    """`table.column` refers to `target.target_column` (the target's primary key by default)."""

    table: str
    column: str
    target: str
    target_column: str = "id"

    @property
    def name(self) -> str:
        return f"{self.table}_{self.column}_ref"

    def postgres_create(self) -> list[str]:
        t, c, p, k, name = self.table, self.column, self.target, self.target_column, self.name
        return [
            f"""
            CREATE OR REPLACE FUNCTION {name}_check() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE
              missing text;
            BEGIN
              -- A row version this transaction wrote (age 0: its xmin is our own xid) needs no
              -- lock: another transaction deleting it must first wait for this one to end.
              PERFORM 1 FROM {p} p WHERE p.{k} IN (SELECT DISTINCT n.{c} FROM written n)
                AND age(p.xmin) <> 0 ORDER BY p.{k} FOR KEY SHARE OF p;
              SELECT n.{c}::text INTO missing FROM written n
                WHERE n.{c} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {p} p WHERE p.{k} = n.{c}) LIMIT 1;
              IF FOUND THEN
                RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
                  MESSAGE = format('{t}.{c} = %s: no such {p}.{k}', missing);
              END IF;
              RETURN NULL;
            END
            $$
            """,
            f"""
            CREATE OR REPLACE FUNCTION {name}_kept() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF TG_OP = 'UPDATE' AND NEW.{k} IS NOT DISTINCT FROM OLD.{k} THEN
                RETURN NEW;
              END IF;
              IF EXISTS (SELECT 1 FROM {t} WHERE {c} = OLD.{k}) THEN
                RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
                  MESSAGE = format('{p}.{k} = %s is still referred to by {t}.{c}', OLD.{k});
              END IF;
              RETURN CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END;
            END
            $$
            """,
            *(f"""
            CREATE TRIGGER {name}_{op} AFTER {op} ON {t} REFERENCING NEW TABLE AS written
              FOR EACH STATEMENT EXECUTE FUNCTION {name}_check()
            """ for op in ("insert", "update")),
            f"""
            CREATE TRIGGER {name}_kept BEFORE DELETE OR UPDATE OF {k} ON {p}
              FOR EACH ROW EXECUTE FUNCTION {name}_kept()
            """,
        ]

    def postgres_drop(self) -> list[str]:
        name = self.name
        return [
            f"DROP TRIGGER IF EXISTS {name}_kept ON {self.target}",
            *(f"DROP TRIGGER IF EXISTS {name}_{op} ON {self.table}" for op in ("insert", "update")),
            f"DROP FUNCTION IF EXISTS {name}_kept()",
            f"DROP FUNCTION IF EXISTS {name}_check()",
        ]

    def sqlite_create(self) -> list[str]:
        t, c, p, k, name = self.table, self.column, self.target, self.target_column, self.name
        kept = f"EXISTS (SELECT 1 FROM {t} WHERE {c} = OLD.{k})"
        return [
            *(f"""
            CREATE TRIGGER {name}_{op} BEFORE {op} ON {t} FOR EACH ROW
              WHEN NEW.{c} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {p} WHERE {k} = NEW.{c})
            BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: {t}.{c} refers to no {p}.{k}'); END
            """ for op in ("insert", "update")),
            f"""
            CREATE TRIGGER {name}_kept_delete BEFORE DELETE ON {p} FOR EACH ROW WHEN {kept}
            BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: {p}.{k} is still referred to by {t}'); END
            """,
            f"""
            CREATE TRIGGER {name}_kept_update BEFORE UPDATE OF {k} ON {p} FOR EACH ROW
              WHEN NEW.{k} IS NOT OLD.{k} AND {kept}
            BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: {p}.{k} is still referred to by {t}'); END
            """,
        ]

    def sqlite_drop(self) -> list[str]:
        name = self.name
        return [f"DROP TRIGGER IF EXISTS {name}_{suffix}"
                for suffix in ("insert", "update", "kept_delete", "kept_update")]


def checked_per_statement(*references: Reference) -> migrations.RunPython:
    """The migration operation creating the references' triggers (and dropping them in reverse).

    Put it after the AlterField operations that set db_constraint=False on the same columns."""
    def apply(forwards: bool):
        def run(apps, schema_editor):
            vendor = schema_editor.connection.vendor
            for reference in references:
                if vendor == "postgresql":
                    statements = reference.postgres_create() if forwards else reference.postgres_drop()
                elif vendor == "sqlite":
                    statements = reference.sqlite_create() if forwards else reference.sqlite_drop()
                else:
                    raise NotImplementedError(f"no statement-checked references on {vendor}")
                for sql in statements:
                    schema_editor.execute(sql, None)  # no parameters: format()'s %s stays as written
        return run
    return migrations.RunPython(apply(True), apply(False))
