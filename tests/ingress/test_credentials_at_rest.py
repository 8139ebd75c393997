"""Access tokens at rest: sealed under CONDUIT_CREDENTIAL_KEYS (the first encrypts, all decrypt),
read first where a token is presented, re-sealed by `credentials_rotate`, refused at start when
they cannot be read, and never replaced by a fallback when no key opens them."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError
from django.db import IntegrityError, connection, transaction

from conduit.credentials import CredentialKeysMissing, CredentialUndecryptable
from ingress.checks import KEY_INVALID, KEYS_MISSING, UNDECRYPTABLE, credentials_readable
from ingress.models import SourceCredential
from ingress.selectors import source_config
from ingress.services.credentials import credential_remove, credential_store, credentials_rotate
from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "EAAtesttoken0000plantedAtRest7c41"
OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


@pytest.fixture
def keys(settings):
    def _keys(*values: str) -> None:
        settings.CONDUIT_CREDENTIAL_KEYS = tuple(values)

    _keys(OLD)
    return _keys


def _column(source) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT sealed_token FROM {SourceCredential._meta.db_table} WHERE source_id = %s", [source.pk]
        )
        return cursor.fetchone()[0]


def test_a_stored_token_is_sealed_in_its_column_and_read_back_where_tokens_are_presented(
    sandbox_source, keys, monkeypatch
):
    monkeypatch.setenv("CONDUIT_SOURCE_SANDBOX_TOKEN", "the-variables-token-000")
    sandbox_source.token_env = "CONDUIT_SOURCE_SANDBOX_TOKEN"
    sandbox_source.save()
    assert source_config(sandbox_source, with_token=True).access_token == "the-variables-token-000"

    credential_store(source_id=sandbox_source.pk, token=TOKEN, actor="owner_test", scopes=["b", "a", "b"])
    stored = _column(sandbox_source)
    assert TOKEN not in stored and TOKEN[-12:] not in stored and stored.startswith("gAAAAA")
    assert Fernet(OLD).decrypt(stored.encode()).decode() == TOKEN
    credential = SourceCredential.objects.get()
    assert (credential.last_four, credential.scopes, credential.stored_by) == (
        "7c41",
        ["a", "b"],
        "owner_test",
    )
    # The stored token is read first, before the variable the source names.
    assert source_config(sandbox_source, with_token=True).access_token == TOKEN


def test_the_database_refuses_a_plaintext_token(sandbox_source, keys):
    credential_store(source_id=sandbox_source.pk, token=TOKEN, actor="owner_test")
    with pytest.raises(IntegrityError, match="credential_sealed"), transaction.atomic():
        SourceCredential.objects.update(sealed_token=TOKEN * 4)


@pytest.mark.parametrize("token", ["", "   ", "two words", "x" * 4097])
def test_what_is_not_a_token_is_refused_and_nothing_stored(sandbox_source, keys, token):
    with pytest.raises(ValueError, match="access token is 1 to 4096 characters"):
        credential_store(source_id=sandbox_source.pk, token=token, actor="owner_test")
    assert not SourceCredential.objects.exists()


def test_without_keys_no_credential_is_stored(sandbox_source, keys):
    keys()
    with pytest.raises(CredentialKeysMissing, match="CONDUIT_CREDENTIAL_KEYS is not set"):
        credential_store(source_id=sandbox_source.pk, token=TOKEN, actor="owner_test")
    assert not SourceCredential.objects.exists()


def test_a_token_no_key_opens_fails_loudly_and_never_falls_back_to_the_variable(
    sandbox_source, keys, monkeypatch, caplog
):
    monkeypatch.setenv("CONDUIT_SOURCE_SANDBOX_TOKEN", "the-variables-token-000")
    sandbox_source.token_env = "CONDUIT_SOURCE_SANDBOX_TOKEN"
    sandbox_source.save()
    credential_store(source_id=sandbox_source.pk, token=TOKEN, actor="owner_test")
    keys(NEW)  # the key that sealed it is gone
    with pytest.raises(CredentialUndecryptable, match="decrypts under no key"):
        source_config(sandbox_source, with_token=True)
    assert (
        f"source={sandbox_source.name}: its stored credential decrypts under no configured key" in caplog.text
    )


def test_with_the_new_key_first_every_credential_still_opens_and_after_rotating_only_the_new_one_is_needed(
    sandbox_source, keys
):
    credential_store(source_id=sandbox_source.pk, token=TOKEN, actor="owner_test")
    keys(NEW, OLD)
    assert source_config(sandbox_source, with_token=True).access_token == TOKEN
    before = _column(sandbox_source)

    dry = credentials_rotate(dry_run=True)
    assert (dry.total, dry.resealed, dry.already_current, dry.unreadable) == (1, 1, 0, ())
    assert _column(sandbox_source) == before  # a dry run changes nothing

    done = credentials_rotate()
    assert (done.resealed, done.already_current) == (1, 0)
    keys(NEW)
    assert source_config(sandbox_source, with_token=True).access_token == TOKEN
    assert credentials_rotate().already_current == 1  # a second run has nothing to do
    # Control: the old key alone no longer opens it.
    keys(OLD)
    with pytest.raises(CredentialUndecryptable):
        source_config(sandbox_source, with_token=True)


def test_the_rotate_command_reports_counts_and_names_what_no_key_opens(sandbox_source, keys, capsys):
    credential_store(source_id=sandbox_source.pk, token=TOKEN, actor="owner_test")
    keys(NEW, OLD)
    call_command("credentials_rotate", "--dry-run")
    assert (
        "1 stored credential(s): would re-encrypt 1, 0 already under the first key" in capsys.readouterr().out
    )
    call_command("credentials_rotate")
    assert "re-encrypted 1, 0 already under the first key" in capsys.readouterr().out
    keys(Fernet.generate_key().decode())
    with pytest.raises(
        CommandError, match=f"1 decrypt under no configured key, left as they are: {sandbox_source.name}"
    ):
        call_command("credentials_rotate")


def test_the_store_command_reads_the_token_from_stdin_and_prints_only_its_last_four(
    sandbox_source, keys, monkeypatch, capsys
):
    monkeypatch.setattr(sys, "stdin", io.StringIO(TOKEN + "\n"))
    call_command(
        "credentials_store", "--source", sandbox_source.name, "--expires-at", "2031-01-01T00:00:00+00:00"
    )
    out = capsys.readouterr()
    assert "access token …7c41 stored encrypted, expires 2031-01-01T00:00:00+00:00" in out.out
    assert TOKEN not in out.out + out.err
    assert source_config(sandbox_source, with_token=True).access_token == TOKEN
    with pytest.raises(CommandError, match="not an ISO 8601 time with a UTC offset"):
        call_command("credentials_store", "--source", sandbox_source.name, "--expires-at", "tomorrow")


def test_removing_wipes_the_token_keeps_the_source_and_clears_the_connection_authorisation(
    sandbox_source, keys
):
    from ingress.services import source_connection_authorize

    credential_store(source_id=sandbox_source.pk, token=TOKEN, actor="owner_test")
    source_connection_authorize(source_id=sandbox_source.pk, actor="owner_test")
    assert credential_remove(source_id=sandbox_source.pk, actor="owner_test")
    sandbox_source.refresh_from_db()
    assert not SourceCredential.objects.exists() and sandbox_source.connection_authorized_by == ""
    assert source_config(sandbox_source, with_token=True).access_token == ""
    assert not credential_remove(source_id=sandbox_source.pk, actor="owner_test")


def test_the_start_check_refuses_credentials_it_cannot_read(sandbox_source, keys):
    assert credentials_readable() == []  # no credential stored, no key set needed
    credential_store(source_id=sandbox_source.pk, token=TOKEN, actor="owner_test")
    assert credentials_readable() == []  # control: the key that sealed it is set
    keys()
    assert [e.id for e in credentials_readable()] == [KEYS_MISSING]
    keys(NEW)
    (error,) = credentials_readable()
    assert error.id == UNDECRYPTABLE and sandbox_source.name in error.msg
    keys("not-a-fernet-key")
    (error,) = credentials_readable()
    assert error.id == KEY_INVALID and "key 1 of 1 is not a Fernet key" in error.msg
    assert "not-a-fernet-key" not in error.msg + error.hint
    keys()
    with pytest.raises(SystemCheckError, match=KEYS_MISSING):
        call_command("check")


def _web(keys: str) -> tuple[bool, str]:
    """Run `entrypoint.sh web` until gunicorn listens (then stop it) or the command ends: whether
    gunicorn started, and what the command printed."""
    base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    env = {
        **os.environ,
        "DATABASE_URL": f"{base}/{connection.settings_dict['NAME']}",
        "CONDUIT_PYTHON": sys.executable,
        "CONDUIT_ENV_FILE": "/nonexistent/.demo.env",
        "CONDUIT_BIND": f"127.0.0.1:{free_port()}",
        "GUNICORN_WORKERS": "1",
        "CONDUIT_CREDENTIAL_KEYS": keys,
    }
    web = subprocess.Popen(
        ["bash", str(ROOT / "deploy" / "entrypoint.sh"), "web"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    seen, started = "", False
    try:
        for line in web.stdout:
            seen += line
            if "Listening at" in line:
                started = True
                break
    finally:
        web.terminate()
        web.wait(timeout=60)
    return started, seen


@pytest.mark.django_db(transaction=True)
def test_the_web_process_refuses_to_start_while_its_credentials_cannot_be_read(sandbox_source, keys):
    """deploy/entrypoint.sh web runs the system checks before gunicorn, which runs none itself."""
    credential_store(source_id=sandbox_source.pk, token=TOKEN, actor="owner_test")
    started, out = _web(keys="")
    assert not started, "gunicorn started with stored credentials and no key to read them"
    assert f"({KEYS_MISSING}) 1 stored credential(s) and CONDUIT_CREDENTIAL_KEYS is not set" in out

    # Control: with the key that sealed it, the same command starts gunicorn.
    started, out = _web(keys=OLD)
    assert started, out


def test_storing_another_token_clears_the_connection_authorisation_and_the_same_one_keeps_it(
    sandbox_source, keys
):
    from ingress.services import source_connection_authorize

    credential_store(source_id=sandbox_source.pk, token=TOKEN, actor="owner_test")
    source_connection_authorize(source_id=sandbox_source.pk, actor="owner_test")
    credential_store(source_id=sandbox_source.pk, token=TOKEN, actor="owner_test")  # the same again
    sandbox_source.refresh_from_db()
    assert sandbox_source.connection_authorized_by == "owner_test"
    credential_store(source_id=sandbox_source.pk, token=TOKEN + "x", actor="owner_test")
    sandbox_source.refresh_from_db()
    assert (sandbox_source.connection_authorized_by, sandbox_source.connection_authorized_at) == ("", None)


@pytest.mark.django_db(transaction=True)
def test_a_token_no_key_opens_can_be_replaced_and_removed_from_the_command_line(
    sandbox_source, keys, monkeypatch, capsys
):
    credential_store(source_id=sandbox_source.pk, token=TOKEN, actor="owner_test")
    keys(NEW)  # the sealing key is lost: the start check warns, it does not stop these commands
    (warning,) = credentials_readable()
    assert warning.id == UNDECRYPTABLE and warning.level < 40  # a warning, not an error
    base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    env = {
        **os.environ,
        "DATABASE_URL": f"{base}/{connection.settings_dict['NAME']}",
        "CONDUIT_ENV_FILE": "/nonexistent/.demo.env",
        "CONDUIT_CREDENTIAL_KEYS": NEW,
    }

    def manage(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
        )

    # Control: a command that runs the start checks sees the unreadable token.
    checked = manage("check", "--fail-level", "WARNING")
    assert checked.returncode != 0 and f"({UNDECRYPTABLE})" in checked.stderr + checked.stdout
    stored = manage("credentials_store", "--source", sandbox_source.name, stdin="EAAreplacementToken0000y7\n")
    assert stored.returncode == 0, stored.stderr
    assert source_config(sandbox_source, with_token=True).access_token == "EAAreplacementToken0000y7"

    sandbox_source.token_env = "CONDUIT_SOURCE_SANDBOX_TOKEN"
    sandbox_source.save()
    monkeypatch.setenv("CONDUIT_SOURCE_SANDBOX_TOKEN", "the-variables-token-000")
    call_command("credentials_remove", "--source", sandbox_source.name)
    assert "it now reads the variable CONDUIT_SOURCE_SANDBOX_TOKEN" in capsys.readouterr().out
    assert source_config(sandbox_source, with_token=True).access_token == "the-variables-token-000"
    with pytest.raises(CommandError, match="has no stored access token"):
        call_command("credentials_remove", "--source", sandbox_source.name)
