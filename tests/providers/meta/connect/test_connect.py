"""Connecting accounts from the back office: an owner's Connect Instagram and Connect Facebook
Page, through the simulator's consent page, to sources connected, authorised and subscribed; and
each way a callback is refused (forged state, a code used twice, another owner's flow) leaving a
receipt in the log and no source changed."""

from __future__ import annotations

import logging

import pytest

from ingress.models import Source, SourceCredential
from ingress.selectors import source_config
from replies.models import ReplyRoute
from tests.doors.conftest import make_user, sign_in
from tests.providers.meta.connect.conftest import (
    APP_ID,
    CHANGELIST,
    CONFIG_ID,
    IG_ACCOUNT,
    PAGES,
    consent,
    local,
    query_of,
    start,
)
from tests.providers.meta.integration.conftest import post_meta  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def subscribed(graph, account: str) -> list[str]:
    rows = [a for a in graph.state.subscribed_apps(account) if a["id"] == APP_ID]
    return rows[0]["subscribed_fields"] if rows else []


@pytest.fixture
def owner(client, graph):
    user = make_user("owner")
    sign_in(client, user, verified=False)
    return user


def connect_instagram(client) -> None:
    back = consent(start(client, "instagram"))
    response = client.get(local(back))
    assert response.status_code == 302 and response["Location"].endswith("/connect/pick/")
    page = client.get(f"{CHANGELIST}connect/pick/")
    assert page.status_code == 200 and IG_ACCOUNT in page.content.decode()
    done = client.post(f"{CHANGELIST}connect/pick/", {"account": [IG_ACCOUNT]}, follow=True)
    assert done.status_code == 200
    return done


def test_connect_instagram_makes_a_source_authorised_and_subscribed(client, owner, graph):
    authorize = start(client, "instagram")
    asked = query_of(authorize)
    assert authorize.startswith(f"{graph.root}/oauth/authorize?")
    assert asked["client_id"] == APP_ID and asked["response_type"] == "code"
    assert set(asked["scope"].split(",")) == {
        "instagram_business_basic",
        "instagram_business_manage_messages",
        "instagram_business_manage_comments",
    }
    assert asked["redirect_uri"] == f"http://testserver{CHANGELIST}connect/instagram/callback/"

    client.get(local(consent(authorize)))
    done = client.post(f"{CHANGELIST}connect/pick/", {"account": [IG_ACCOUNT]}, follow=True)

    source = Source.objects.get(account_ref=IG_ACCOUNT)
    assert (source.adapter, source.name, source.app_id) == (
        "meta-instagram",
        "instagram-user_test_01",
        APP_ID,
    )
    assert source.token_env == "" and source.secret_env == "CONDUIT_SOURCE_INSTAGRAM_APP_SECRET"
    assert source.connected_at is not None  # a backfill from here, not a flood
    assert source.connection_authorized_by == owner.username
    credential = SourceCredential.objects.get(source=source)
    assert credential.expires_at is not None and credential.stored_by == owner.username
    assert "instagram_business_manage_comments" in credential.scopes
    # The 60-day token, not the short-lived one, is what the source acts with.
    token = source_config(source, with_token=True).access_token
    assert graph.state.token_owner(token)["expires_at"] - graph.state.token_owner(token)["issued_at"] > 86400
    assert {r.purpose: r.transport_name for r in ReplyRoute.objects.filter(source=source)} == {
        "public_ack": "meta-comment-reply",
        "private_delivery": "meta-private-reply",
    }
    assert {"comments", "messages"} <= set(subscribed(graph, IG_ACCOUNT))
    assert source.subscription_problem == ""
    assert "connected and subscribed (read back and verified)" in done.content.decode()


def test_connect_instagram_reads_the_flat_code_answer_clients_meet_live(client, owner, graph, monkeypatch):
    """Meta documents the code exchange wrapped in `data`; clients meet it flat, with a numeric
    user_id and the permissions as a list (fixtures/meta_recorded_PROVENANCE.md)."""
    answered, exchange = [], graph.state.instagram_code_exchange
    monkeypatch.setattr(
        graph.state, "instagram_code_exchange", lambda form: answered.append(exchange(form)) or answered[-1]
    )
    graph.control("/_sim/login", {"object": "instagram", "account": IG_ACCOUNT, "code_answer": "flat"})
    connect_instagram(client)
    (flat,) = answered
    assert "data" not in flat and isinstance(flat["user_id"], int)  # the flat answer was served
    credential = SourceCredential.objects.get(source__account_ref=IG_ACCOUNT)
    assert set(credential.scopes) == {
        "instagram_business_basic",
        "instagram_business_manage_messages",
        "instagram_business_manage_comments",
    }
    assert Source.objects.get(account_ref=IG_ACCOUNT).subscription_problem == ""


def test_connect_facebook_page_connects_the_pages_picked(client, owner, graph):
    authorize = start(client, "facebook")
    asked = query_of(authorize)
    assert authorize.startswith(f"{graph.root}/v26.0/dialog/oauth?")
    assert asked["config_id"] == CONFIG_ID and asked["client_id"] == APP_ID
    client.get(local(consent(authorize)))
    page = client.get(f"{CHANGELIST}connect/pick/").content.decode()
    assert all(p in page for p in PAGES) and "no clock expiry" in page

    client.post(f"{CHANGELIST}connect/pick/", {"account": [PAGES[1]]})

    source = Source.objects.get(adapter="meta-page")
    assert source.account_ref == PAGES[1] and source.name == "facebook-test-page-02"
    assert SourceCredential.objects.get(source=source).expires_at is None  # a Page token
    assert "pages_messaging" in SourceCredential.objects.get(source=source).scopes
    assert {"feed", "messages"} <= set(subscribed(graph, PAGES[1]))
    assert subscribed(graph, PAGES[0]) == []  # not picked: nothing asked of it
    assert not Source.objects.filter(account_ref=PAGES[0]).exists()


def test_a_forged_state_is_refused_with_a_receipt_and_nothing_changes(client, owner, graph, caplog):
    back = query_of(consent(start(client, "instagram")))
    with caplog.at_level(logging.WARNING, logger="conduit.ingress"):
        response = client.get(
            f"{CHANGELIST}connect/instagram/callback/", {"code": back["code"], "state": "forged-state"}
        )
    assert response.status_code == 302 and response["Location"] == CHANGELIST
    assert "reason=state_unknown" in caplog.text and back["code"] not in caplog.text
    assert graph.state.grants == 0  # the code was never exchanged
    assert not Source.objects.exists()


def test_a_code_used_twice_is_refused_by_the_platform(client, owner, graph, caplog):
    first = consent(start(client, "instagram"))
    client.get(local(first))
    client.post(f"{CHANGELIST}connect/pick/", {"account": [IG_ACCOUNT]})
    before = SourceCredential.objects.get().sealed_token

    # The same callback again: its state was taken.
    with caplog.at_level(logging.WARNING, logger="conduit.ingress"):
        client.get(local(first))
    assert "reason=state_unknown" in caplog.text
    # A fresh state with the used code: Meta refuses the exchange.
    fresh = query_of(start(client, "instagram"))["state"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="conduit.ingress"):
        response = client.get(
            f"{CHANGELIST}connect/instagram/callback/", {"code": query_of(first)["code"], "state": fresh}
        )
    assert response.status_code == 302
    assert "reason=grant_refused" in caplog.text
    assert graph.state.grants == 1
    assert SourceCredential.objects.get().sealed_token == before
    assert Source.objects.count() == 1


def test_a_callback_for_another_owners_flow_is_refused(client, graph, caplog):
    from django.test import Client

    sign_in(client, make_user("owner"), verified=False)
    back = consent(start(client, "instagram"))
    other = Client()
    from django.contrib.auth.models import Group, User

    intruder = User.objects.create_user("owner_other", password="unused-test-password", is_staff=True)
    intruder.groups.add(Group.objects.get(name="owners"))
    other.force_login(intruder)
    with caplog.at_level(logging.WARNING, logger="conduit.ingress"):
        response = other.get(local(back))
    assert response.status_code == 302 and "reason=state_unknown actor=owner_other" in caplog.text
    assert other.get(f"{CHANGELIST}connect/pick/")["Location"] == CHANGELIST  # no grant to pick from
    assert graph.state.grants == 0 and not Source.objects.exists()
    # The owner whose flow it is still completes it.
    assert client.get(local(back))["Location"].endswith("/connect/pick/")


def test_a_reviewer_sees_no_connect_button_and_cannot_start_one(client, graph, caplog):
    from django.contrib.auth.models import Permission, User

    sign_in(client, make_user("reviewer"), verified=False)
    with caplog.at_level(logging.WARNING, logger="conduit.ingress"):
        assert client.post(f"{CHANGELIST}connect/instagram/").status_code == 403
        callback = client.get(f"{CHANGELIST}connect/instagram/callback/", {"state": "x", "code": "y"})
    assert callback.status_code == 403 and "reason=not_permitted actor=reviewer_test" in caplog.text
    # Someone who may see the sources but is not an owner: the page, without the buttons.
    viewer = User.objects.create_user("viewer_test", password="unused-test-password", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_source"))
    sign_in(client, viewer, verified=False)
    page = client.get(CHANGELIST)
    assert page.status_code == 200 and "Connect Instagram" not in page.content.decode()
    sign_in(client, make_user("owner"), verified=False)
    owners_page = client.get(CHANGELIST).content.decode()
    assert "Connect Instagram" in owners_page and "Connect Facebook Page" in owners_page
    assert graph.state.grants == 0


def test_the_subscription_refused_at_connect_is_shown_as_a_failure(client, owner, graph):
    graph.control(
        "/_sim/faults", {"mode": "error", "code": 200, "method": "POST", "path_contains": "subscribed_apps"}
    )
    client.get(local(consent(start(client, "instagram"))))
    done = client.post(f"{CHANGELIST}connect/pick/", {"account": [IG_ACCOUNT]}, follow=True).content.decode()
    assert "connected, but not subscribed" in done and "200" in done
    assert Source.objects.get().subscription_problem != ""
    assert subscribed(graph, IG_ACCOUNT) == []


def test_reconnect_keeps_the_source_and_clears_needs_reauth_after_a_graph_call(client, owner, graph):
    client.get(local(consent(start(client, "instagram"))))
    client.post(f"{CHANGELIST}connect/pick/", {"account": [IG_ACCOUNT]})
    source = Source.objects.get()
    old = source_config(source, with_token=True).access_token
    Source.objects.filter(pk=source.pk).update(needs_reauth=True)
    page = client.get(f"{CHANGELIST}{source.pk}/change/").content.decode()
    assert "Reconnect" in page and "its sends wait" in page

    client.get(local(consent(start(client, "instagram", source=source.pk))))
    assert (
        "reconnects source instagram-user_test_01"
        in client.get(f"{CHANGELIST}connect/pick/").content.decode()
    )
    done = client.post(f"{CHANGELIST}connect/pick/", {"account": [IG_ACCOUNT]}, follow=True).content.decode()

    source.refresh_from_db()
    assert Source.objects.count() == 1 and not source.needs_reauth
    assert source_config(source, with_token=True).access_token != old
    assert "reconnected and subscribed" in done and "sending resumes" in done


def test_connect_without_the_apps_settings_names_what_is_missing(client, owner, graph, settings, monkeypatch):
    settings.CONDUIT_META_LOGIN_CONFIG_ID = ""
    monkeypatch.delenv("CONDUIT_SOURCE_META_APP_SECRET")
    response = client.post(f"{CHANGELIST}connect/facebook/", follow=True).content.decode()
    assert "CONDUIT_META_LOGIN_CONFIG_ID" in response and "CONDUIT_SOURCE_META_APP_SECRET" in response
    assert graph.state.grants == 0


@pytest.fixture
def deliver(post_meta, django_capture_on_commit_callbacks):  # noqa: F811 (the imported fixture)
    def _deliver(body: bytes) -> None:
        with django_capture_on_commit_callbacks(execute=True):
            assert post_meta(body).status_code == 200

    return _deliver


def test_a_refused_token_waits_and_reconnect_sends_each_waiting_reply_once(client, owner, graph, deliver):
    from ingress.services import source_update
    from replies.models import ReplyAction
    from replies.sender import reply_send_next
    from replies.services import reply_approve, reply_copy_create
    from tests.providers.meta.sending.conftest import PERSON, applied, ig_comment_body

    connect_instagram(client)
    source = Source.objects.get()
    source_update(source_id=source.pk, changes={"trigger_keywords": ["price"]})
    reply_copy_create(
        source_id=source.pk, purpose="public_ack", channel="public_ack", text="Thanks!", actor="owner_test"
    )
    waiting = []
    for comment in ("17900000000000410", "17900000000000411"):
        graph.control(
            "/_sim/comments",
            {
                "account": IG_ACCOUNT,
                "media_id": "17800000000000041",
                "id": comment,
                "text": "price?",
                "from_id": PERSON,
            },
        )
        deliver(ig_comment_body(comment, "17800000000000041"))
        action = ReplyAction.objects.get(event__message_ref=comment, purpose="public_ack")
        assert reply_approve(action_id=action.pk, actor="reviewer_test").ok
        waiting.append(comment)
    graph.control("/_sim/faults", {"mode": "error", "code": 190, "subcode": 460, "status": 400, "count": 1})
    reply_send_next()  # Meta refuses the token: nothing applied, the source waits for a person
    source.refresh_from_db()
    assert source.needs_reauth and reply_send_next() is None
    assert applied(graph)["public"] == {}

    client.get(local(consent(start(client, "instagram", source=source.pk))))
    client.post(f"{CHANGELIST}connect/pick/", {"account": [IG_ACCOUNT]})
    source.refresh_from_db()
    assert not source.needs_reauth
    while reply_send_next() is not None:
        pass
    assert applied(graph)["public"] == {comment: 1 for comment in waiting}


def test_an_account_refused_by_registration_is_shown_and_nothing_is_left_half_made(
    client, owner, graph, monkeypatch
):
    from ingress.services import source_register

    # An Instagram account of the same app registered by hand, naming other variables: the app's
    # sources of one object share one callback, so a connected one naming others is refused.
    monkeypatch.setenv("CONDUIT_SOURCE_HAND_SECRET", "0123456789abcdef0123456789abcdef")
    monkeypatch.setenv("CONDUIT_SOURCE_HAND_VERIFY", "verify-token-test-only-02")
    monkeypatch.setenv("CONDUIT_SOURCE_HAND_TOKEN", "graph-token-test-only")
    source_register(
        name="by-hand",
        adapter="meta-instagram",
        account_ref="17841400000000002",
        event_types=["comment.created"],
        purposes=[],
        trigger_keywords=[],
        secret_env="CONDUIT_SOURCE_HAND_SECRET",
        verify_token_env="CONDUIT_SOURCE_HAND_VERIFY",
        token_env="CONDUIT_SOURCE_HAND_TOKEN",
        app_id=APP_ID,
        source_url=f"{graph.root}/instagram/v26.0",
    )
    client.get(local(consent(start(client, "instagram"))))
    done = client.post(f"{CHANGELIST}connect/pick/", {"account": [IG_ACCOUNT]}, follow=True)
    assert done.status_code == 200
    page = done.content.decode()
    assert "Account user_test_01: not connected:" in page and "secret_env" in page
    assert list(Source.objects.values_list("name", flat=True)) == ["by-hand"]
    assert not SourceCredential.objects.exists() and subscribed(graph, IG_ACCOUNT) == []


def test_the_tokens_a_flow_is_given_appear_in_no_log_page_or_session(client, owner, graph, caplog):
    from django.contrib.sessions.models import Session

    pages = []
    with caplog.at_level(logging.DEBUG):
        for login, account in (("instagram", IG_ACCOUNT), ("facebook", PAGES[0])):
            authorize = start(client, login)
            back = client.get(local(consent(authorize)))
            pick = client.get(f"{CHANGELIST}connect/pick/")
            # The session as stored while the grant waits for the pick.
            stored = [s.session_data + repr(s.get_decoded()) for s in Session.objects.all()]
            done = client.post(f"{CHANGELIST}connect/pick/", {"account": [account]}, follow=True)
            pages += [authorize, back["Location"], pick.content.decode(), done.content.decode(), *stored]
        for source in Source.objects.all():
            pages.append(client.get(f"{CHANGELIST}{source.pk}/change/").content.decode())
            pages.append(client.get(f"{CHANGELIST}{source.pk}/history/").content.decode())
    issued = [t for t in graph.state.tokens if len(t) > 20]
    # Both flows' tokens: Instagram's short-lived and 60-day ones, Facebook's user tokens, each Page's.
    assert len(issued) >= 5
    said = "\n".join([*pages, caplog.text, *(r.getMessage() for r in caplog.records)])
    leaked = [t[:6] for t in issued if t in said]
    assert not leaked, f"tokens in the outputs: {leaked}"
    assert "Connect selected accounts" in "".join(pages)  # the pages searched are the real ones
