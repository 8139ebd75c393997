"""A hot standby of the test cluster, made with pg_basebackup -R, for the session."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
import pytest

from tests.conftest import free_port


def _pg_bin() -> Path:
    found = os.environ.get("CONDUIT_PG_BIN") or max(
        (str(p.parent) for p in Path("/usr/lib/postgresql").glob("*/bin/pg_basebackup")), default=""
    )
    if not found:
        pytest.fail(
            "PostgreSQL binaries not found (make test's scripts/with-postgres exports CONDUIT_PG_BIN)"
        )
    return Path(found)


def _dsn(settings_dict: dict, port) -> str:
    return f"host={settings_dict['HOST']} port={port} user={settings_dict['USER']} dbname={settings_dict['NAME']}"


@pytest.fixture(scope="session")
def replica_settings(django_db_setup, django_db_blocker):
    """The default alias's settings pointed at a streaming hot standby of its cluster.

    The standby is a pg_basebackup -R of the primary scripts/with-postgres started (wal_level
    replica and loopback replication connections are PostgreSQL's and initdb's defaults), started
    on another loopback port. It replays the test database like any other.
    """
    from django.db import connections

    primary = dict(connections["default"].settings_dict)
    pg_bin = _pg_bin()
    work = Path(tempfile.mkdtemp(prefix="conduit-replica."))
    runas: list[str] = []
    if os.geteuid() == 0:
        # PostgreSQL refuses to run as root: the standby runs as with-postgres's cluster user.
        shutil.chown(work, "postgres")
        runas = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    data = work / "data"
    # A hot standby needs at least the primary's max_connections (with-postgres raises it).
    with django_db_blocker.unblock(), connections["default"].cursor() as cursor:
        cursor.execute("SHOW max_connections")
        (max_connections,) = cursor.fetchone()
    try:
        subprocess.run(
            [
                *runas,
                str(pg_bin / "pg_basebackup"),
                "-h",
                primary["HOST"],
                "-p",
                str(primary["PORT"]),
                "-U",
                primary["USER"],
                "-D",
                str(data),
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        subprocess.run(
            [
                *runas,
                str(pg_bin / "pg_ctl"),
                "-D",
                str(data),
                "-l",
                str(work / "standby.log"),
                "-w",
                "-o",
                f"-p {port} -k {work} -c listen_addresses=127.0.0.1 -c hot_standby=on"
                f" -c max_connections={max_connections}",
                "start",
            ],
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.CalledProcessError as exc:
        log = (work / "standby.log").read_text()[-1000:] if (work / "standby.log").exists() else ""
        shutil.rmtree(work, ignore_errors=True)
        pytest.fail(f"could not make the replica: {exc.cmd[len(runas)]}: {exc.stderr[-1000:]} {log}")
    replica = {**primary, "PORT": str(port), "TEST": {**primary.get("TEST", {}), "MIRROR": "default"}}
    try:
        with psycopg.connect(_dsn(replica, port), autocommit=True) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone()[0], "not a standby"
        yield replica
    finally:
        subprocess.run(
            [*runas, str(pg_bin / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(work, ignore_errors=True)


class Replica:
    """The standby as the test sees it: pause and resume replay, wait until it caught up."""

    def __init__(self, settings_dict: dict):
        self.settings_dict = settings_dict

    def _standby(self):
        return psycopg.connect(_dsn(self.settings_dict, self.settings_dict["PORT"]), autocommit=True)

    def pause(self) -> None:
        with self._standby() as conn:
            conn.execute("SELECT pg_wal_replay_pause()")

    def resume(self) -> None:
        with self._standby() as conn:
            conn.execute("SELECT pg_wal_replay_resume()")

    def caught_up(self, timeout: float = 30) -> None:
        """Wait until the standby replayed everything the primary had written when called.

        The insert position, not the write one: with synchronous_commit=off (make test) a commit
        record may still be in the WAL buffers.
        """
        from django.db import connections

        with connections["default"].cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_insert_lsn()")
            (target,) = cursor.fetchone()
        deadline = time.monotonic() + timeout
        with self._standby() as conn:
            while not conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [target]).fetchone()[0]:
                assert time.monotonic() < deadline, "the replica did not catch up"
                time.sleep(0.05)


@pytest.fixture(scope="module", autouse=True)
def _replica_alias(replica_settings):
    """The "replica" alias, as DATABASE_REPLICA_URL configures it, for this directory's tests.

    Module-scoped so it exists before pytest-django sets each test up (the tests name it in
    `databases`), and removed after, so no other test sees it. A mirror of "default" in test
    terms: never flushed (it cannot be: it is read-only).
    """
    from django.db import connections

    connections.settings["replica"] = dict(replica_settings)
    yield
    if hasattr(connections._connections, "replica"):
        connections["replica"].close()
        delattr(connections._connections, "replica")
    del connections.settings["replica"]


@pytest.fixture
def replica(replica_settings):
    """Pause and resume the replica's replay, wait until it caught up; replay resumed after."""
    handle = Replica(replica_settings)
    yield handle
    handle.resume()
