"""register_source for Meta sources: variable names only, one callback per app, the Graph URL."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from ingress.models import Source
from tests.providers.meta.integration.conftest import APP_ID, NEXT_ENV, SECRET_ENV, TOKEN_ENV, VERIFY_ENV


def register(name: str, account: str, *extra: str, adapter: str = "meta-instagram"):
    args = [
        name,
        "--adapter",
        adapter,
        "--account-ref",
        account,
        "--meta-app-id",
        APP_ID,
        "--secret-env",
        SECRET_ENV,
        "--verify-token-env",
        VERIFY_ENV,
        "--token-env",
        TOKEN_ENV,
        "--event-type",
        "comment.created",
        *extra,
    ]
    call_command("register_source", *args)
    return Source.objects.get(name=name)


def test_meta_source_holds_variable_names_and_the_pinned_graph_url(db, settings):
    settings.CONDUIT_GRAPH_API_VERSION = "v26.0"
    source = register("ig", "17841400000000001")
    assert (source.secret_env, source.verify_token_env, source.token_env) == (
        SECRET_ENV,
        VERIFY_ENV,
        TOKEN_ENV,
    )
    assert source.source_url == "https://graph.instagram.com/v26.0"
    assert source.connected_at is not None
    page = register("page", "100000000000001", adapter="meta-page")
    assert page.source_url == "https://graph.facebook.com/v26.0"


def test_graph_url_points_a_source_at_the_simulator(db):
    source = register("ig", "17841400000000001", "--graph-url", "http://127.0.0.1:8766/instagram/v26.0")
    assert source.source_url == "http://127.0.0.1:8766/instagram/v26.0"


def test_two_secret_variables_are_kept_for_rotation(db):
    source = register("ig", "17841400000000001", "--secret-env", NEXT_ENV)
    assert source.secret_env_next == NEXT_ENV


def test_sources_of_one_app_and_object_must_share_secret_and_verify_variables(db):
    register("ig-one", "17841400000000001")
    with pytest.raises(CommandError) as refused:
        call_command(
            "register_source",
            "ig-two",
            "--adapter",
            "meta-instagram",
            "--account-ref",
            "17841400000000002",
            "--meta-app-id",
            APP_ID,
            "--secret-env",
            "CONDUIT_SOURCE_OTHER_SECRET",
            "--verify-token-env",
            VERIFY_ENV,
            "--token-env",
            TOKEN_ENV,
            "--event-type",
            "comment.created",
        )
    assert "ig-one" in str(refused.value) and "secret_env" in str(refused.value)
    # Another object of the same app may name its own (Instagram Login has its own app secret).
    call_command(
        "register_source",
        "page",
        "--adapter",
        "meta-page",
        "--account-ref",
        "100000000000001",
        "--meta-app-id",
        APP_ID,
        "--secret-env",
        "CONDUIT_SOURCE_OTHER_SECRET",
        "--verify-token-env",
        VERIFY_ENV,
        "--token-env",
        TOKEN_ENV,
        "--event-type",
        "comment.created",
    )


@pytest.mark.parametrize("missing", ["--meta-app-id", "--verify-token-env", "--token-env"])
def test_meta_source_needs_its_app_and_variables(db, missing):
    args = {"--meta-app-id": APP_ID, "--verify-token-env": VERIFY_ENV, "--token-env": TOKEN_ENV}
    args.pop(missing)
    with pytest.raises(CommandError) as refused:
        call_command(
            "register_source",
            "ig",
            "--adapter",
            "meta-instagram",
            "--account-ref",
            "17841400000000001",
            "--secret-env",
            SECRET_ENV,
            "--event-type",
            "comment.created",
            *[x for pair in args.items() for x in pair],
        )
    assert missing.strip("-").replace("-", "_") in str(refused.value)


def test_a_secret_value_is_refused_as_a_variable_name(db):
    with pytest.raises(CommandError) as refused:
        register("ig", "17841400000000001", "--secret-env", "0123456789abcdef0123456789abcdef")
    assert "secret_env_next" in str(refused.value)


def test_meta_purposes_route_to_the_meta_transports_by_default(db):
    from replies.models import ReplyRoute

    register(
        "ig",
        "17841400000000001",
        "--purpose",
        "public_ack",
        "--purpose",
        "private_delivery",
        "--graph-url",
        "http://127.0.0.1:8766/instagram/v26.0",
    )
    routes = dict(ReplyRoute.objects.values_list("purpose", "transport_name"))
    assert routes == {"public_ack": "meta-comment-reply", "private_delivery": "meta-private-reply"}
    assert set(ReplyRoute.objects.values_list("target_url", flat=True)) == {
        "http://127.0.0.1:8766/instagram/v26.0"
    }


def test_a_meta_purpose_without_a_default_needs_an_explicit_route(db):
    with pytest.raises(CommandError) as refused:
        register("ig", "17841400000000001", "--purpose", "follow_up")
    assert "--route" in str(refused.value)


def test_sandbox_takes_one_secret_and_no_meta_flags(db):
    with pytest.raises(CommandError):
        call_command(
            "register_source",
            "sb",
            "--adapter",
            "sandbox-social",
            "--account-ref",
            "acct_test_09",
            "--secret-env",
            "CONDUIT_SOURCE_A_SECRET",
            "--secret-env",
            "CONDUIT_SOURCE_B_SECRET",
            "--event-type",
            "comment.created",
        )
    with pytest.raises(CommandError):
        call_command(
            "register_source",
            "sb",
            "--adapter",
            "sandbox-social",
            "--account-ref",
            "acct_test_09",
            "--secret-env",
            "CONDUIT_SOURCE_A_SECRET",
            "--meta-app-id",
            APP_ID,
            "--event-type",
            "comment.created",
        )
