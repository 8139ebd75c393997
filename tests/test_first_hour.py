"""The first hour: the documented registration and its shipped fixture, honest demo copy, quiet commands."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from tests.conftest import TEST_SECRET

ROOT = Path(__file__).resolve().parent.parent
SOURCES_DOC = ROOT / "docs" / "platforms" / "sources.md"
DEMO = ROOT / "scripts" / "demo"
PRIVATE_PURPOSE = "private_delivery"
# What a public reply promising a private message says (the demo's copy is English).
PROMISES_A_DM = re.compile(r"\b(DMs?|direct message|private message|inbox)\b", re.IGNORECASE)


def documented(command: str) -> list[str]:
    """The argv of the one `python manage.py <command> ...` example under "Registering a source"."""
    text = SOURCES_DOC.read_text()
    section = text[text.index("## Registering a source") :]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"```sh\n(.*?)\n```", section, flags=re.S)
    found = [b for b in blocks if b.startswith(f"python manage.py {command} ") and "NAME" not in b]
    assert len(found) == 1, f"one {command} example in {SOURCES_DOC.name}#register, found {len(found)}"
    argv = shlex.split(found[0].replace("\\\n", " "))
    assert argv[:3] == ["python", "manage.py", command]
    return argv[3:]


def option(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == name]


@pytest.mark.django_db(transaction=True)
def test_the_documented_registration_and_its_shipped_fixture_record_one_event(
    live_server, monkeypatch, capsys
):
    """docs/platforms/sources.md#register: the register_source example, then the post_fixture
    command beside it delivering the comment shipped for that account, record one event."""
    from ingress.models import InboundEvent
    from replies.models import ReplyAction

    register, post = documented("register_source"), documented("post_fixture")
    name, account = register[0], option(register, "--account-ref")[0]
    (path,) = [a for a in post if not a.startswith("--") and a not in option(post, "--source")]
    assert option(post, "--source") == [name]
    shipped = json.loads((ROOT / path).read_text())
    # Reserved synthetic identifiers only, and the fixture is the registered account's.
    assert account.startswith("acct_test_") and shipped["account"] == account
    assert [e["id"][:9] for e in shipped["events"]] == ["evt_test_"]

    (secret_env,) = option(register, "--secret-env")
    monkeypatch.setenv(secret_env, TEST_SECRET)  # what the demo's .demo.env holds, for this test
    monkeypatch.chdir(ROOT)  # the documented path is relative to the checkout, as printed
    call_command("register_source", *register)
    call_command("post_fixture", *post, "--url", live_server.url)
    assert "HTTP 200" in capsys.readouterr().out

    (event,) = InboundEvent.objects.filter(source__name=name)
    assert (event.source_account_ref, event.source_event_id, event.seen_count) == (
        account,
        shipped["events"][0]["id"],
        1,
    )
    planned = ReplyAction.objects.filter(event=event)
    assert sorted(planned.values_list("purpose", flat=True)) == sorted(option(register, "--purpose"))


def demo_copy() -> dict[str, tuple[tuple[str, ...], dict[str, str]]]:
    """What scripts/demo gives each of its sources: (declared purposes, purpose -> copy text)."""
    from conduit.providers.meta.login import InstagramLogin

    script = DEMO.read_text()
    lines = script.splitlines()
    start = next(i for i, line in enumerate(lines) if "manage.py register_source sandbox" in line)
    command = lines[start]
    while command.endswith("\\"):
        start += 1
        command = command[:-1] + lines[start]
    argv = shlex.split(command)
    argv = argv[argv.index("register_source") :]
    sandbox = dict(c.split("=", 1) for c in option(argv, "--copy"))
    # The Instagram source is connected through the Connect button: the login declares its purposes.
    assert "scripts/demo-connect" in script
    (literal,) = re.findall(r"^COPY = (\{.*?^\})", script, flags=re.S | re.M)
    instagram = ast.literal_eval(literal)
    return {
        "sandbox": (tuple(option(argv, "--purpose")), sandbox),
        "instagram": (tuple(InstagramLogin.purposes), instagram),
    }


def test_the_demo_copy_promises_a_dm_only_where_a_private_reply_with_copy_is_declared():
    """A demo reply saying "on its way by DM" is kept only by a declared private purpose that has
    copy of its own (without copy its planned reply can never be approved)."""
    sources = demo_copy()
    assert all(copy for _, copy in sources.values()), sources  # the script was read, not skipped
    for name, (purposes, copy) in sources.items():
        assert set(copy) <= set(purposes), f"{name}: copy for an undeclared purpose"
        promising = [p for p, text in copy.items() if p != PRIVATE_PURPOSE and PROMISES_A_DM.search(text)]
        if promising:
            assert PRIVATE_PURPOSE in purposes, f"{name}: {promising} promise a DM; no private purpose"
            assert copy.get(PRIVATE_PURPOSE), (
                f"{name}: {promising} promise a DM the private reply has no copy for"
            )
        missing = [p for p in purposes if not copy.get(p)]
        assert missing == [], f"{name}: the demo gives {missing} no copy: those replies cannot be approved"


def test_manage_py_commands_do_not_print_axes_start_up_line():
    env = {**os.environ, "SECRET_KEY": "test-only-not-secret", "CONDUIT_ENV_FILE": "/dev/null"}
    done = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "System check identified no issues" in done.stdout  # the command ran, and said so
    assert "AXES" not in done.stdout + done.stderr, done.stdout + done.stderr
