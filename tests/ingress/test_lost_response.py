"""The lost-response proof (docs/concepts/event-contract.md#delivery-identity): a real server process killed after commit, before the ack."""

import http.client
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ingress.models import Delivery, EventTransition, InboundEvent
from replies.models import ReplyAction
from tests.conftest import fixture_body, free_port, server_started, sign, subprocess_env
from tests.ingress.test_concurrency import post

CRASH_SERVER = Path(__file__).with_name("crash_server.py")


@pytest.mark.django_db(transaction=True)
def test_kill_after_commit_before_ack_then_redelivery_converges(live_server, sandbox_source):
    port = free_port()
    env = subprocess_env()
    server = subprocess.Popen(
        [sys.executable, str(CRASH_SERVER), str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        server_started(port, server)

        body = fixture_body("comment__northstar")
        with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
            post(f"http://127.0.0.1:{port}", body, sign(body, delivery_id="msg_test_lost"))
        assert server.wait(timeout=30) == -signal.SIGKILL
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()

    # The commit survived the kill: one record, its plan, no acknowledgement sent.
    event = InboundEvent.objects.get()
    assert event.seen_count == 1
    assert ReplyAction.objects.count() == 2
    transitions = EventTransition.objects.count()

    # The provider never saw a 2xx, so it retries the same delivery (re-signed, as
    # Standard Webhooks senders do) against a healthy server.
    status = post(live_server.url, body, sign(body, delivery_id="msg_test_lost"))
    assert status == 200
    again = InboundEvent.objects.get()
    assert (again.pk, again.event_key, again.seen_count) == (event.pk, event.event_key, 2)
    assert ReplyAction.objects.count() == 2
    assert EventTransition.objects.count() == transitions
    assert Delivery.objects.get().seen_count == 2
