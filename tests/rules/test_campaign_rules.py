"""Which campaign answers a comment, as pure rules (replies.matching): scope, window, top-level,
keywords or any comment, the precedence between campaigns, and the variant a reply key picks."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from conduit.providers.base import Observation
from replies.matching import (
    AFTER_END,
    BEFORE_START,
    NO_KEYWORD,
    NOT_IN_SCOPE,
    REFUSAL_WORDS,
    REPLY_TO_COMMENT,
    CampaignRule,
    rules_winner,
    variant_index,
)

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
RULE = CampaignRule(
    campaign_id=7,
    campaign_version=3,
    every_post=False,
    posts=frozenset({"media_test_1", "media_test_2"}),
    keywords=("guide", "link"),
    any_comment=False,
    top_level_only=False,
    purposes=("public_ack",),
    starts_at=T0,
    ends_at=T0 + timedelta(days=1),
    activated_at=T0,
)


def _comment(text="the GUIDE please", *, post="media_test_1", parent="", at=T0 + timedelta(hours=1)):
    return Observation(
        index=0,
        source_system="meta-instagram",
        source_account_ref="acct_test_1",
        source_event_id="evt_test_1",
        event_type="comment.created",
        conversation_ref=post,
        message_ref="comment_test_1",
        sender_ref="person_test_1",
        occurred_at=at,
        occurred_at_original=at.isoformat(),
        payload_hash="0" * 64,
        contract_version="meta-v1",
        canary=False,
        text=text,
        parent_ref=parent,
    )


@pytest.mark.parametrize(
    "rule, comment, refusal",
    [
        (RULE, _comment(), ""),
        (RULE, _comment(post="media_test_2", text="link?"), ""),
        (RULE, _comment(post="media_test_3"), NOT_IN_SCOPE),
        (replace(RULE, every_post=True, posts=frozenset()), _comment(post="media_test_3"), ""),
        (RULE, _comment(at=T0 - timedelta(seconds=1)), BEFORE_START),
        (RULE, _comment(at=T0), ""),  # the start is inside the window
        (RULE, _comment(at=T0 + timedelta(days=1)), AFTER_END),  # the end is not
        (RULE, _comment(at=T0 + timedelta(days=1) - timedelta(seconds=1)), ""),
        (replace(RULE, ends_at=None), _comment(at=T0 + timedelta(days=400)), ""),
        (RULE, _comment(parent="comment_test_0"), ""),  # replies match unless top-level only
        (replace(RULE, top_level_only=True), _comment(parent="comment_test_0"), REPLY_TO_COMMENT),
        (replace(RULE, top_level_only=True), _comment(parent=""), ""),
        (RULE, _comment(text="guidebook"), NO_KEYWORD),  # whole words only
        (RULE, _comment(text="nothing here"), NO_KEYWORD),
        (replace(RULE, keywords=(), any_comment=True), _comment(text="nothing here"), ""),
        (replace(RULE, keywords=()), _comment(text="guide"), NO_KEYWORD),  # no keyword: matches nothing
    ],
)
def test_a_rule_matches_or_says_why_not(rule, comment, refusal):
    assert rule.observed_refusal(comment) == refusal
    assert REFUSAL_WORDS[refusal]


def test_scope_is_judged_before_the_window_and_the_window_before_the_words():
    late_elsewhere = _comment(post="media_test_3", at=T0 + timedelta(days=2), text="nothing")
    assert RULE.observed_refusal(late_elsewhere) == NOT_IN_SCOPE
    assert RULE.observed_refusal(replace(late_elsewhere, conversation_ref="media_test_1")) == AFTER_END
    early = _comment(at=T0 - timedelta(days=1), text="nothing", parent="comment_test_0")
    assert replace(RULE, top_level_only=True).observed_refusal(early) == BEFORE_START
    reply = _comment(text="nothing", parent="comment_test_0")
    assert replace(RULE, top_level_only=True).observed_refusal(reply) == REPLY_TO_COMMENT


def test_a_posts_campaign_wins_over_an_every_post_one_then_the_earliest_activated_then_the_first_made():
    every = replace(
        RULE, campaign_id=1, every_post=True, posts=frozenset(), activated_at=T0 - timedelta(days=9)
    )
    later = replace(RULE, campaign_id=2, activated_at=T0 + timedelta(minutes=5))
    earlier = replace(RULE, campaign_id=9, activated_at=T0 + timedelta(minutes=1))
    twin = replace(RULE, campaign_id=8, activated_at=T0 + timedelta(minutes=1))
    comment = _comment()
    assert rules_winner([every], comment) is every
    assert rules_winner([every, later], comment) is later
    assert rules_winner([later, every], comment) is later
    assert rules_winner([every, later, earlier], comment) is earlier
    assert rules_winner([earlier, twin], comment) is twin  # the same moment: the first made
    never = replace(RULE, campaign_id=3, activated_at=None)
    assert rules_winner([never, later], comment) is later  # never activated: after any activated
    assert rules_winner([never], comment) is never
    assert rules_winner([every, later], _comment(text="nothing")) is None
    assert rules_winner([], comment) is None
    # A campaign that does not match is not a candidate, however specific.
    assert rules_winner([later, every], _comment(post="media_test_3")) is every


def test_a_reply_key_picks_its_variant_evenly_and_always_the_same():
    keys = [f"{n * 7919:016x}" + "0" * 48 for n in range(3000)]
    picks = [variant_index(key, 3) for key in keys]
    assert [variant_index(key, 3) for key in keys] == picks
    assert {picks.count(v) for v in range(3)} == {1000}
    assert variant_index("f" * 64, 1) == 0
    # The first 16 hex digits decide, and only they: 0x5 is 2 mod 3 (0x51, with a 17th, is 0).
    assert variant_index("0000000000000005" + "1" * 48, 3) == 2
    assert variant_index("0000000000000005" + "0" * 48, 3) == 2
