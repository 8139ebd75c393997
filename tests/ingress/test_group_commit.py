"""Group commit over HTTP on PostgreSQL: webhook bodies that reach one process while a commit is in
flight share the next one, a failure is answered as alone, and a process killed in a shared
commit leaves every acknowledged event stored (conduit/groupcommit.py)."""

from __future__ import annotations

import contextlib
import http.client
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from conduit import groupcommit
from ingress import selectors
from ingress.models import Delivery, InboundEvent
from replies.models import ReplyAction
from tests.conftest import free_port, server_started, sign, subprocess_env

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_source_cached_by_an_earlier_test():
    """A source an earlier test cached reads as changed: a body would write nothing, read the
    source afresh and run again, out of the group the test arranged."""
    selectors._READ.clear()
    yield
    selectors._READ.clear()


@pytest.fixture(autouse=True)
def patient(monkeypatch, settings):
    """Group commit on (CONDUIT_GROUP_COMMIT), and patient: the tests hold a commit in flight for
    longer than the queue's patience (0.25 s) on purpose, and what queues behind it waits for it
    here (tests/test_groupcommit.py holds the patience)."""
    settings.CONDUIT_GROUP_COMMIT = True
    monkeypatch.setattr(groupcommit._process, "patience", 60.0)


GROUP_SERVER = Path(__file__).with_name("group_crash_server.py")


def comment(n: int, text: str = "CHECKLIST") -> bytes:
    event = {
        "id": f"evt_test_g{n:03}",
        "type": "comment.created",
        "post_id": "post_test_07",
        "comment_id": f"msg_test_g{n:03}",
        "from_id": "person_test_09",
        "created_at": "2026-01-15T14:30:00Z",
        "text": text,
    }
    return json.dumps({"account": "acct_test_01", "events": [event]}).encode()


def post(port: int, body: bytes, delivery_id: str) -> tuple[int, dict] | Exception:
    """The answer to one signed delivery, or the error its connection met."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        headers = {**sign(body, delivery_id=delivery_id), "Content-Type": "application/json"}
        conn.request("POST", "/webhooks/sandbox/", body=body, headers=headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    except (ConnectionError, http.client.HTTPException) as exc:
        return exc
    finally:
        conn.close()


def _dsn() -> str:
    s = connection.settings_dict
    return f"host={s['HOST']} port={s['PORT']} user={s['USER']} dbname={s['NAME']}"


class Deliveries:
    """Deliveries posted each from a thread of its own; `answers[delivery id]` once joined."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.answers: dict[str, object] = {}
        self.threads: list[threading.Thread] = []

    def start(self, body: bytes, delivery_id: str) -> None:
        def run() -> None:
            self.answers[delivery_id] = post(self.port, body, delivery_id)

        self.threads.append(threading.Thread(target=run))
        self.threads[-1].start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=60)
            assert not thread.is_alive()


@contextlib.contextmanager
def first_commit_held(deliveries: Deliveries, body: bytes, delivery_id: str):
    """`body` posted and its one statement held in flight (the delivery table locked) until the
    block ends: what the block posts reaches the process while that commit is in flight."""
    with psycopg.connect(_dsn()) as holder:
        holder.execute(f"LOCK TABLE {Delivery._meta.db_table} IN EXCLUSIVE MODE")
        deliveries.start(body, delivery_id)
        deadline = time.monotonic() + 30
        while not holder.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0]:
            assert time.monotonic() < deadline, "the first delivery never reached the database"
            time.sleep(0.01)
        yield
        holder.commit()


def queued(count: int) -> None:
    deadline = time.monotonic() + 30
    while groupcommit._process.waiting() < count:
        assert time.monotonic() < deadline, f"{groupcommit._process.waiting()} bodies queued, not {count}"
        time.sleep(0.01)


def transactions_of(*event_ids: str) -> dict[str, str]:
    """Each event's inserting transaction (its row's xmin)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT source_event_id, xmin::text FROM {InboundEvent._meta.db_table} "
            "WHERE source_event_id = ANY(%s)",
            [list(event_ids)],
        )
        return dict(cursor.fetchall())


def _port(live_server) -> int:
    return int(live_server.url.rsplit(":", 1)[1])


def test_bodies_that_arrive_while_a_commit_is_in_flight_share_the_next_commit(live_server, sandbox_source):
    deliveries = Deliveries(_port(live_server))
    with first_commit_held(deliveries, comment(0), "msg_test_g0"):
        for n in range(1, 6):
            deliveries.start(comment(n), f"msg_test_g{n}")
        queued(5)
    deliveries.join()

    for n in range(6):
        status, answer = deliveries.answers[f"msg_test_g{n}"]
        assert status == 200 and [r["result"] for r in answer["results"]] == ["accepted"]
    held = transactions_of(*(f"evt_test_g{n:03}" for n in range(6)))
    assert len(held) == 6
    first = held.pop("evt_test_g000")
    assert len(set(held.values())) == 1, "the five bodies queued behind the commit did not share one"
    assert set(held.values()) != {first}
    # Each body's plan was written with it: two replies an event.
    assert ReplyAction.objects.count() == 12


def test_a_refused_body_in_a_group_is_answered_as_alone_and_the_others_are_stored(
    live_server, sandbox_source
):
    port = _port(live_server)
    assert post(port, comment(9), "msg_test_g9")[0] == 200
    conflict = comment(9, text="CHECKLIST edited")  # event 9 again, with another payload
    deliveries = Deliveries(port)
    with first_commit_held(deliveries, comment(0), "msg_test_g0"):
        for n in (1, 2):
            deliveries.start(comment(n), f"msg_test_g{n}")
        deliveries.start(conflict, "msg_test_conflict")
        queued(3)
    deliveries.join()

    for n in (0, 1, 2):
        status, answer = deliveries.answers[f"msg_test_g{n}"]
        assert status == 200 and [r["result"] for r in answer["results"]] == ["accepted"]
    status, answer = deliveries.answers["msg_test_conflict"]
    assert status == 202
    assert [(r["result"], r.get("reason_code")) for r in answer["results"]] == [
        ("quarantined", "identity_conflict")
    ]
    # The same body alone meets the same answer (its first receipt).
    assert post(port, conflict, "msg_test_conflict") == (status, answer)
    assert InboundEvent.objects.get(source_event_id="evt_test_g009").seen_count == 1
    assert InboundEvent.objects.count() == 4


@pytest.mark.parametrize("moment", ["before_commit", "after_commit"])
def test_a_process_killed_in_a_shared_commit_loses_no_acknowledged_event(live_server, sandbox_source, moment):
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(GROUP_SERVER), str(port), moment],
        env={**subprocess_env(), "CONDUIT_GROUP_COMMIT": "on"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    grouped = [f"msg_test_g{n}" for n in range(1, 5)]
    try:
        server_started(port, server)
        deliveries = Deliveries(port)
        with first_commit_held(deliveries, comment(0), "msg_test_g0"):
            for n, delivery_id in enumerate(grouped, start=1):
                deliveries.start(comment(n), delivery_id)
            time.sleep(2)  # the four reach the server's queue (the server names the group it dies in)
        deliveries.join()
        assert server.wait(timeout=30) == -signal.SIGKILL
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()
    said = server.stderr.read().decode()
    assert f"killed {moment} of a shared commit of 4" in said, said

    stored = transactions_of(*(f"evt_test_g{n:03}" for n in range(5)))
    acknowledged = {
        f"evt_test_g{n:03}"
        for n, delivery_id in enumerate(["msg_test_g0", *grouped])
        if not isinstance(deliveries.answers[delivery_id], Exception)
        and deliveries.answers[delivery_id][0] == 200
    }
    # Every acknowledged event is stored: the lone first body, and none of the group, whose
    # requests the kill cut before any was answered.
    assert acknowledged - set(stored) == set(), "acknowledged, and not stored"
    assert acknowledged == {"evt_test_g000"}
    assert all(isinstance(deliveries.answers[d], Exception) for d in grouped), deliveries.answers
    if moment == "before_commit":  # what was in flight is gone as a whole
        assert set(stored) == {"evt_test_g000"}
    else:  # committed as a whole, in one transaction, and never acknowledged
        assert len(stored) == 5
        assert len({stored[f"evt_test_g{n:03}"] for n in range(1, 5)}) == 1

    # The sender retries what it never saw acknowledged; each event ends stored once.
    for n, delivery_id in enumerate(grouped, start=1):
        status, answer = post(_port(live_server), comment(n), delivery_id)
        assert status == 200
        assert answer["results"][0]["result"] == ("accepted" if moment == "before_commit" else "duplicate")
    events = dict(InboundEvent.objects.values_list("source_event_id", "seen_count"))
    assert events == {f"evt_test_g{n:03}": 1 if n == 0 or moment == "before_commit" else 2 for n in range(5)}
    assert ReplyAction.objects.count() == 10
