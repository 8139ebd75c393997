"""`manage.py campaign`: create, list, preview, activate, pause and end; refused inputs name the problem."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from replies.models import Campaign
from tests.replies.campaigns.conftest import MEDIA_A

pytestmark = pytest.mark.django_db


def _run(*args) -> str:
    from io import StringIO

    out = StringIO()
    call_command("campaign", *args, stdout=out)
    return out.getvalue()


def test_create_list_switch_and_end_a_campaign(instagram):
    out = _run(
        "create",
        "reel GUIDE",
        "--source",
        instagram.name,
        "--post",
        MEDIA_A,
        "--keyword",
        "guide",
        "--keyword",
        "link",
        "--copy",
        "public_ack=Sent you the guide!",
        "--copy",
        "public_ack=Check your DMs!",
        "--copy",
        "private_delivery=Here is the link: https://example.invalid/guide",
        "--starts",
        "2026-12-01T09:00:00+00:00",
        "--activate",
    )
    assert "campaign 'reel GUIDE': active, version 1" in out
    campaign = Campaign.objects.get(name="reel GUIDE")
    assert (campaign.posts, campaign.keywords, campaign.purposes, campaign.every_post) == (
        [MEDIA_A],
        ["guide", "link"],
        ["public_ack", "private_delivery"],
        False,
    )
    assert campaign.copies.filter(purpose="public_ack").count() == 2  # two variants
    listed = json.loads(_run("list", "--json", "--source", instagram.name))
    assert [(c["name"], c["state"]) for c in listed] == [
        ("ig-test: every post", "active"),
        ("reel GUIDE", "active"),
    ]
    assert "reel GUIDE  [active, v1]" in _run("list")
    assert "paused" in _run("pause", "reel GUIDE")
    assert "active" in _run("activate", "reel GUIDE")
    assert "ended" in _run("end", "reel GUIDE")
    with pytest.raises(CommandError, match="campaign 'reel GUIDE' is ended: it cannot be made active"):
        _run("activate", "reel GUIDE")


@pytest.mark.parametrize(
    "args, problem",
    [
        (
            ["--source", "nope", "--every-post", "--any-comment", "--copy", "public_ack=x"],
            "no source named 'nope'",
        ),
        (
            ["--every-post", "--any-comment", "--copy", "other=x"],
            "'other' is not a declared purpose of source 'ig-test'",
        ),
        (["--every-post", "--any-comment", "--copy", "public_ack"], "--copy takes PURPOSE=TEXT"),
        (["--every-post", "--any-comment", "--copy", "public_ack=x", "--starts", "tomorrow"], "ISO 8601"),
        (
            ["--every-post", "--any-comment", "--copy", "public_ack=x", "--starts", "2026-12-01T09:00:00"],
            "needs a UTC offset",
        ),
        (
            [
                "--every-post",
                "--any-comment",
                "--copy",
                "public_ack=x",
                "--starts",
                "2026-12-02T00:00:00+00:00",
                "--ends",
                "2026-12-01T00:00:00+00:00",
            ],
            "a campaign ends after it starts",
        ),
        (
            ["--every-post", "--any-comment", "--copy", "public_ack=x", "--channel", "private_delivery=dm"],
            "--channel names 'private_delivery', which has no --copy",
        ),
        (["--every-post", "--keyword", "x" * 65, "--copy", "public_ack=x"], "at most 64 characters"),
        (
            ["--every-post", "--any-comment", "--copy", "public_ack=a", "--copy", "public_ack=a"],
            "the variants of one purpose's copy are different texts",
        ),
    ],
)
def test_refused_inputs_name_the_problem(instagram, args, problem):
    if "--source" not in args:
        args = ["--source", instagram.name, *args]
    with pytest.raises(CommandError, match=problem):
        _run("create", "refused", *args)
    assert not Campaign.objects.filter(name="refused").exists()


def test_scope_and_rule_are_each_required_once(instagram):
    for args, problem in [
        (["--copy", "public_ack=x", "--any-comment"], "one of the arguments --post --every-post is required"),
        (
            ["--copy", "public_ack=x", "--every-post"],
            "one of the arguments --keyword --any-comment is required",
        ),
        (["--copy", "public_ack=x", "--every-post", "--post", MEDIA_A, "--any-comment"], "not allowed with"),
    ]:
        with pytest.raises(CommandError, match=problem):
            _run("create", "refused", "--source", instagram.name, *args)
    _run(
        "create",
        "taken",
        "--source",
        instagram.name,
        "--every-post",
        "--any-comment",
        "--copy",
        "public_ack=x",
    )
    with pytest.raises(CommandError, match="a campaign named 'taken' exists already"):
        _run(
            "create",
            "taken",
            "--source",
            instagram.name,
            "--every-post",
            "--any-comment",
            "--copy",
            "public_ack=x",
        )
    with pytest.raises(CommandError, match="no campaign named 'missing'"):
        _run("pause", "missing")


def test_preview_from_the_command_line(instagram, comment):
    comment(MEDIA_A, "send the guide")
    _run(
        "create",
        "reel",
        "--source",
        instagram.name,
        "--post",
        MEDIA_A,
        "--keyword",
        "guide",
        "--copy",
        "public_ack=x",
        "--starts",
        "2026-01-01T00:00:00+00:00",
    )
    out = _run("preview", "reel")
    assert "MATCH  matched" in out
