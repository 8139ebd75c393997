"""make fuzz: Schemathesis against the served OpenAPI description, on the database scripts/with-postgres made.

Migrates, creates a token user and a few events and a quarantine receipt, serves Conduit on a
free loopback port (manage.py runserver, DEBUG off) and runs the schemathesis CLI against
/api/schema/ with the token. Extra arguments go to schemathesis (e.g. --max-examples 50).
Exits with schemathesis's status.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Every check that judges a response alone (no 5xx, status, content type, headers, schema),
# and that invalid input is refused (negative_data_rejection).
CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
        "response_headers_conformance",
        "negative_data_rejection",
    ]
)


def seed() -> str:
    """Migrate, create the token user and sample rows; the token's key."""
    import django

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conduit.settings")
    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client
    from rest_framework.authtoken.models import Token

    from ingress.services import source_register
    from tests.conftest import SECRET_ENV, TEST_SECRET, fixture_body, sign

    call_command("migrate", verbosity=0)
    os.environ[SECRET_ENV] = TEST_SECRET
    source_register(
        name="sandbox",
        adapter="sandbox-social",
        account_ref="acct_test_01",
        event_types=["comment.created"],
        purposes=["public_ack", "private_delivery"],
        trigger_keywords=["CHECKLIST"],
        secret_env=SECRET_ENV,
    )
    client = Client(HTTP_HOST="127.0.0.1")
    for name in ("comment__northstar", "comment__batch", "comment__missing_post_id"):
        body = fixture_body(name)
        response = client.post(
            "/webhooks/sandbox/", data=body, content_type="application/json", headers=sign(body)
        )
        assert response.status_code in (200, 202), (name, response.status_code, response.content[:200])
    user = User.objects.create_user("fuzz_token_user_test")
    # A token acts with its user's permissions: the read API's view permissions.
    from django.contrib.auth.models import Permission

    user.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="ingress", codename__in=["view_inboundevent", "view_quarantinereceipt"]
        )
    )
    return Token.objects.create(user=user).key


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str]) -> int:
    key = seed()
    port = free_port()
    env = {**os.environ, "DEBUG": "false", "CONDUIT_LOG_LEVEL": "WARNING"}
    log = tempfile.NamedTemporaryFile(prefix="conduit-fuzz-server.", suffix=".log", delete=False)
    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "runserver",
            "--noreload",
            "--nothreading",
            f"127.0.0.1:{port}",
        ],
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    print(f"schemathesis_run: Conduit on 127.0.0.1:{port}, server log {log.name}", flush=True)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{base}/api/schema/", timeout=1).read()
                break
            except OSError:
                time.sleep(0.2)
        command = [
            str(Path(sys.executable).with_name("schemathesis")),
            "run",
            f"{base}/api/schema/",
            "--header",
            f"Authorization: Token {key}",
            "--checks",
            CHECKS,
            "--max-examples",
            "100",
            "--seed",
            "10",
            "--workers",
            "1",
            *argv,
        ]
        return subprocess.call(command, env={**env, "NO_COLOR": "1"})
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
