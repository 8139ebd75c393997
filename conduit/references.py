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
  and writes its history in one statement). Existence and the rows to lock come from
  one snapshot, and a target a waited-for delete took is counted missing;
- a referred-to row cannot be deleted, nor its key changed, nor its table truncated,
  while rows refer to it (Django's on_delete runs before the delete, as with the key).

The deleting side assumes READ COMMITTED, Conduit's only isolation level: a delete in a
REPEATABLE READ transaction cannot see referring rows committed after its snapshot,
where a key's check would fail it with a serialization error.

Both raise SQLSTATE 23503 (foreign_key_violation), an IntegrityError as the key's was.
SQLite, the embedded default, checks row by row. A NULL refers to nothing.
Migrations call these at the time they run: a change to the SQL here reaches an
existing database only through a new migration that creates the triggers again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from django.db import migrations

from conduit.storage import vendor_sql


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
        return self.postgres_functions() + self.postgres_triggers()

    def postgres_drop(self) -> list[str]:
        name = self.name
        return self.postgres_drop_triggers() + [
            f"DROP FUNCTION IF EXISTS {name}_kept()",
            f"DROP FUNCTION IF EXISTS {name}_check()",
        ]

    def postgres_functions(self) -> list[str]:
        t, c, p, k, name = self.table, self.column, self.target, self.target_column, self.name
        return [
            f"""
            CREATE OR REPLACE FUNCTION {name}_check() RETURNS trigger LANGUAGE plpgsql AS $$
            DECLARE
              absent bigint;
              others bigint;
              locked bigint;
              missing text;
              mine xid := xid(pg_current_xact_id());
            BEGIN
              -- One snapshot: targets not found, and targets whose current version another
              -- transaction wrote. A version this transaction wrote itself (its xmin our own
              -- top-level xid) needs no lock: a delete of it must first wait for this one to end.
              SELECT count(*) FILTER (WHERE p.{k} IS NULL),
                     count(*) FILTER (WHERE p.{k} IS NOT NULL AND p.xmin <> mine)
                INTO absent, others
                FROM (SELECT DISTINCT n.{c} AS k FROM written n WHERE n.{c} IS NOT NULL) n
                LEFT JOIN {p} p ON p.{k} = n.k;
              IF others > 0 AND absent = 0 THEN
                PERFORM 1 FROM {p} p WHERE p.{k} IN (SELECT DISTINCT n.{c} FROM written n)
                  AND p.xmin <> mine ORDER BY p.{k} FOR KEY SHARE OF p;
                GET DIAGNOSTICS locked = ROW_COUNT;
                -- Fewer locked than found: a delete the locks waited for took a target.
                IF locked < others THEN
                  absent := others - locked;
                END IF;
              END IF;
              IF absent > 0 THEN
                SELECT n.{c}::text INTO missing FROM written n
                  WHERE n.{c} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {p} p WHERE p.{k} = n.{c}) LIMIT 1;
                RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
                  MESSAGE = format('{t}.{c} = %s: no such {p}.{k}', coalesce(missing, '(deleted meanwhile)'));
              END IF;
              RETURN NULL;
            END
            $$
            """,
            f"""
            CREATE OR REPLACE FUNCTION {name}_kept() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF TG_OP = 'TRUNCATE' THEN
                -- After the truncation: a TRUNCATE naming the referring table too has emptied it.
                IF EXISTS (SELECT 1 FROM {t} WHERE {c} IS NOT NULL) THEN
                  RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation',
                    MESSAGE = '{p} is truncated while {t}.{c} still refers to it';
                END IF;
                RETURN NULL;
              END IF;
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
        ]

    def postgres_triggers(self) -> list[str]:
        t, p, k, name = self.table, self.target, self.target_column, self.name
        return [
            *(
                f"""
            CREATE OR REPLACE TRIGGER {name}_{op} AFTER {op} ON {t} REFERENCING NEW TABLE AS written
              FOR EACH STATEMENT EXECUTE FUNCTION {name}_check()
            """
                for op in ("insert", "update")
            ),
            f"""
            CREATE OR REPLACE TRIGGER {name}_kept BEFORE DELETE OR UPDATE OF {k} ON {p}
              FOR EACH ROW EXECUTE FUNCTION {name}_kept()
            """,
            f"""
            CREATE OR REPLACE TRIGGER {name}_kept_truncate AFTER TRUNCATE ON {p}
              FOR EACH STATEMENT EXECUTE FUNCTION {name}_kept()
            """,
        ]

    def postgres_drop_triggers(self) -> list[str]:
        name = self.name
        return [
            f"DROP TRIGGER IF EXISTS {name}_kept_truncate ON {self.target}",
            f"DROP TRIGGER IF EXISTS {name}_kept ON {self.target}",
            *(f"DROP TRIGGER IF EXISTS {name}_{op} ON {self.table}" for op in ("insert", "update")),
        ]

    def sqlite_create(self) -> list[str]:
        t, c, p, k, name = self.table, self.column, self.target, self.target_column, self.name
        kept = f"EXISTS (SELECT 1 FROM {t} WHERE {c} = OLD.{k})"
        return [
            *(
                f"""
            CREATE TRIGGER IF NOT EXISTS {name}_{op} BEFORE {op} ON {t} FOR EACH ROW
              WHEN NEW.{c} IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {p} WHERE {k} = NEW.{c})
            BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: {t}.{c} refers to no {p}.{k}'); END
            """
                for op in ("insert", "update")
            ),
            f"""
            CREATE TRIGGER IF NOT EXISTS {name}_kept_delete BEFORE DELETE ON {p} FOR EACH ROW WHEN {kept}
            BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: {p}.{k} is still referred to by {t}'); END
            """,
            f"""
            CREATE TRIGGER IF NOT EXISTS {name}_kept_update BEFORE UPDATE OF {k} ON {p} FOR EACH ROW
              WHEN NEW.{k} IS NOT OLD.{k} AND {kept}
            BEGIN SELECT RAISE(ABORT, 'FOREIGN KEY constraint failed: {p}.{k} is still referred to by {t}'); END
            """,
        ]

    def sqlite_drop(self) -> list[str]:
        name = self.name
        return [
            f"DROP TRIGGER IF EXISTS {name}_{suffix}"
            for suffix in ("insert", "update", "kept_delete", "kept_update")
        ]


def checked_per_statement(*references: Reference) -> migrations.RunPython:
    """The migration operation creating the references' triggers (and dropping them in reverse).

    Put it after the AlterField operations that set db_constraint=False on the same columns."""

    def statements(forwards: bool):
        def for_vendor(vendor: str) -> list[str] | None:
            if vendor == "postgresql":
                return [
                    sql
                    for r in references
                    for sql in (r.postgres_create() if forwards else r.postgres_drop())
                ]
            if vendor == "sqlite":
                return [
                    sql for r in references for sql in (r.sqlite_create() if forwards else r.sqlite_drop())
                ]
            return None  # no statement-checked references there: refused by name

        return for_vendor

    return vendor_sql(statements(True), statements(False))


def sqlite_table_remade(*references: Reference, operations: list) -> list:
    """`operations` with the references' SQLite triggers dropped before and created after.

    SQLite makes some schema changes (a check constraint added, among others) by remaking the
    table: a copy, a drop, a rename. A trigger that names the table (its own, or one on a table
    it refers to) breaks that rename, so the references on or to a remade table step aside
    while it is remade. PostgreSQL alters the table in place: nothing to do there."""

    def on_sqlite(statements) -> Callable[[str], list[str]]:
        return lambda vendor: [sql for r in references for sql in statements(r)] if vendor == "sqlite" else []

    drop, create = on_sqlite(Reference.sqlite_drop), on_sqlite(Reference.sqlite_create)
    return [vendor_sql(drop, create), *operations, vendor_sql(create, drop)]
