"""A source names only credential variables the deployment declared, and its token goes only to
its platform's hosts.

The hole this closes: an owner edited a Meta source in the admin to `token_env=SECRET_KEY` and a
Graph URL of their choosing, and the next reconcile sent `access_token=<SECRET_KEY>` there.
"""

from __future__ import annotations

import http.client
from http.server import BaseHTTPRequestHandler

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from conduit.process_secrets import secret_read
from conduit.providers.meta.graph import GraphCallFailed, graph_request
from ingress.models import Source
from ingress.selectors import source_config
from ingress.services import source_update
from tests.doors.conftest import make_user, sign_in
from tests.providers.meta.integration.conftest import IG_ACCOUNT, _meta_env, register_meta  # noqa: F401 (autouse fixture)

SERVER_SECRET = "test-only-not-secret"  # make test's SECRET_KEY: what must never leave


@pytest.fixture
def recorder(loopback):
    """A loopback Graph stand-in that records every request line (path and query) it receives."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            body = b'{"data": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = loopback(Handler)
    return f"http://127.0.0.1:{server.server_port}/v26.0", seen


@pytest.fixture
def instagram(db, recorder):
    return register_meta("ig-door-test", "meta-instagram", IG_ACCOUNT, graph_url=recorder[0])


@pytest.mark.parametrize("name", ["SECRET_KEY", "DATABASE_URL", "CONDUIT_METRICS_TOKEN", "PATH", "HOME"])
def test_a_server_variable_cannot_be_named(instagram, name):
    with pytest.raises(ValidationError) as refused:
        source_update(source_id=instagram.pk, changes={"token_env": name})
    assert "token_env" in refused.value.message_dict
    instagram.refresh_from_db()
    assert instagram.token_env != name


def test_a_declared_prefix_admits_a_name_and_server_settings_stay_refused(settings):
    from conduit.process_secrets import credential_name_refusal

    settings.CONDUIT_CREDENTIAL_PREFIXES = ("CONDUIT_SOURCE_", "META_")
    assert credential_name_refusal("META_APP_TOKEN") == ""
    settings.CONDUIT_CREDENTIAL_PREFIXES = ("",)  # every name: still never a server setting
    assert "server's own settings" in credential_name_refusal("SECRET_KEY")
    assert "server's own settings" in credential_name_refusal("CONDUIT_METRICS_TOKEN")


@pytest.mark.parametrize(
    "url",
    [
        "https://attacker.example.invalid/v26.0",
        "http://graph.facebook.com/v26.0",
        "https://graph.facebook.com.attacker.example.invalid/",
        "https://graph.facebook.com:8443/v26.0",
        "https://user:pass@graph.facebook.com/v26.0",
        "http://10.0.0.1/v26.0",
    ],
)
def test_a_graph_url_off_meta_is_refused(instagram, url):
    with pytest.raises(ValidationError) as refused:
        source_update(source_id=instagram.pk, changes={"source_url": url})
    assert "source_url" in refused.value.message_dict


@pytest.mark.parametrize(
    "url",
    [
        "https://graph.facebook.com/v26.0",
        "https://graph.instagram.com/v26.0",
        "http://127.0.0.1:8080/v26.0",
        "http://localhost/v26.0",
    ],
)
def test_meta_hosts_and_loopback_are_accepted(instagram, url):
    assert source_update(source_id=instagram.pk, changes={"source_url": url}).source_url == url


def test_the_owner_editing_in_the_admin_is_refused_with_the_reason(client, instagram):
    sign_in(client, make_user("owner"), verified=False)
    url = f"/admin/ingress/source/{instagram.pk}/change/"
    form = client.get(url).context["adminform"].form
    data = {name: form[name].value() for name in form.fields if form[name].value() is not None}
    data.update(
        event_types=", ".join(instagram.event_types),
        purposes=", ".join(instagram.purposes),
        token_env="SECRET_KEY",
        source_url="https://attacker.example.invalid/v26.0",
    )
    page = client.post(url, data)
    assert page.status_code == 200  # the form again, with its errors; nothing saved
    errors = page.context["adminform"].form.errors
    assert "server's own settings" in errors["token_env"][0]
    assert "graph.facebook.com" in errors["source_url"][0]
    instagram.refresh_from_db()
    assert (instagram.token_env, instagram.source_url) != (
        "SECRET_KEY",
        "https://attacker.example.invalid/v26.0",
    )


def test_register_source_refuses_an_undeclared_variable(db):
    with pytest.raises(CommandError, match="CONDUIT_CREDENTIAL_PREFIXES"):
        call_command(
            "register_source",
            "sandbox-door-test",
            "--adapter",
            "sandbox-social",
            "--account-ref",
            "acct_test_door",
            "--event-type",
            "comment.created",
            "--secret-env",
            "AWS_SECRET_ACCESS_KEY",
        )


def _read_once(source: Source) -> None:
    """One Graph read as the source, with the token its configuration presents."""
    config = source_config(source, with_token=True)
    try:
        graph_request(
            base_url=source.source_url,
            path=f"{source.account_ref}/media",
            params={},
            access_token=config.access_token,
            timeout=2,
        )
    except GraphCallFailed:
        pass


def test_a_row_written_before_the_rule_reads_no_server_secret(instagram, recorder, monkeypatch):
    """Through real HTTP: a source row naming SECRET_KEY (written before the rule, past every
    form) presents no token at all; the server's secret never reaches the wire."""
    monkeypatch.setenv("SECRET_KEY", SERVER_SECRET)
    Source.objects.filter(pk=instagram.pk).update(token_env="SECRET_KEY")
    instagram.refresh_from_db()
    _read_once(instagram)
    url, seen = recorder
    assert seen and all(SERVER_SECRET not in line for line in seen)
    assert all("access_token=&" in line or line.endswith("access_token=") for line in seen)
    assert secret_read("SECRET_KEY") == ""


def test_control_a_declared_variable_reaches_the_loopback_graph(instagram, recorder):
    """Positive control: the same read with the source's own token variable presents it, so the
    recorder would have seen SECRET_KEY had the rule not stopped it."""
    _read_once(instagram)
    _, seen = recorder
    assert any("access_token=graph-token-test-only" in line for line in seen)


def test_a_row_pointing_off_meta_sends_nothing(instagram, monkeypatch):
    """A Graph URL written before the rule: no connection is even opened."""
    Source.objects.filter(pk=instagram.pk).update(source_url="https://attacker.example.invalid/v26.0")
    instagram.refresh_from_db()
    opened = []
    monkeypatch.setattr(http.client.HTTPSConnection, "connect", lambda self: opened.append(self.host))
    monkeypatch.setattr(http.client.HTTPConnection, "connect", lambda self: opened.append(self.host))
    assert source_config(instagram, with_token=True).access_token == ""
    with pytest.raises(GraphCallFailed) as refused:
        graph_request(base_url=instagram.source_url, path="me", params={}, access_token="anything", timeout=2)
    assert refused.value.kind == "url_refused" and not refused.value.sent
    assert opened == []


def test_a_meta_route_off_meta_is_refused_and_never_built(instagram):
    from replies.models import ReplyRoute
    from replies.services import reply_route_declare
    from replies.transports import transport_for

    with pytest.raises(ValidationError) as refused:
        reply_route_declare(
            source_id=instagram.pk,
            purpose="public_ack",
            transport_name="meta-comment-reply",
            target_url="https://attacker.example.invalid/v26.0",
        )
    assert "target_url" in refused.value.message_dict
    route = ReplyRoute.objects.create(
        source=instagram,
        purpose="public_ack",
        transport_name="meta-comment-reply",
        target_url="https://attacker.example.invalid/v26.0",
    )
    with pytest.raises(ValueError, match="access token would be sent there"):
        transport_for(route)


@pytest.mark.parametrize(
    "name", ["SECRET_KEY\n", "CONDUIT_SOURCE_X\n", " CONDUIT_SOURCE_X", "conduit_source_x"]
)
def test_a_name_is_matched_whole(instagram, name):
    """A trailing newline once passed the name's pattern (`$` matches before it) and skipped the rule."""
    with pytest.raises(ValidationError) as refused:
        source_update(source_id=instagram.pk, changes={"token_env": name})
    assert "token_env" in refused.value.message_dict
