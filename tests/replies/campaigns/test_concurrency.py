"""Rules edited while comments arrive, with real concurrency on PostgreSQL: every event's recorded
rules version reads back (RulesVersion, CampaignVersion) to exactly the rules that decided it, a
match or not, through ingest's cached hot path."""

from __future__ import annotations

import threading
import time
from datetime import datetime

import pytest
from django.db import connection
from django.test import Client

from ingress.models import InboundEvent
from replies.matching import CampaignRule, rules_winner
from replies.models import Campaign, CampaignVersion, RulesVersion
from replies.services import campaign_create, campaign_update
from tests.conftest import sign
from tests.reconcile.conftest import body, item

POST = "post_test_07"  # item()'s post
SENDERS, COMMENTS, FLIPS = 4, 30, 24


def _rule(campaign: Campaign, version: int) -> CampaignRule:
    said = CampaignVersion.objects.get(campaign=campaign, version=version).rule
    return CampaignRule(
        campaign_id=campaign.pk,
        campaign_version=version,
        every_post=said["every_post"],
        posts=frozenset(said["posts"]),
        keywords=tuple(said["keywords"]),
        any_comment=said["any_comment"],
        top_level_only=said["top_level_only"],
        purposes=tuple(said["purposes"]),
        starts_at=datetime.fromisoformat(said["starts_at"]),
        ends_at=datetime.fromisoformat(said["ends_at"]) if said["ends_at"] else None,
        activated_at=campaign.activated_at,
    )


def _disagreements(source) -> list[str]:
    """Each event whose recorded outcome is not what its recorded rules version says."""
    from replies.services.catch_up import _observation

    campaigns = {str(c.pk): c for c in Campaign.objects.filter(source=source)}
    recorded = dict(RulesVersion.objects.filter(source=source).values_list("version", "campaigns"))
    wrong = []
    for event in InboundEvent.objects.filter(source=source).order_by("id"):
        active = recorded[event.trigger_rule_version]
        winner = rules_winner([_rule(campaigns[pk], v) for pk, v in active.items()], _observation(event))
        said = (winner.campaign_id, winner.campaign_version) if winner else (None, None)
        if said != (event.trigger_campaign, event.trigger_campaign_version) or event.trigger_match != bool(
            winner
        ):
            wrong.append(
                f"{event.source_event_id} {event.message_text!r} rules v{event.trigger_rule_version}: "
                f"recorded {(event.trigger_campaign, event.trigger_campaign_version)}, the rules say {said}"
            )
    return wrong


def _run(source) -> Campaign:
    flip = campaign_create(
        name="flip",
        source_id=source.pk,
        posts=[POST],
        keywords=["alpha"],
        copies={"public_ack": ["Thanks!"]},
        activate=True,
        actor="editor_test",
        starts_at=datetime.fromisoformat("2026-01-01T00:00:00+00:00"),
    )
    failures: list[BaseException] = []
    # One comment first: this process now holds the rules of the version the edits start from.
    warm = body(item(999, text="alpha please"))
    assert (
        Client()
        .post("/webhooks/sandbox/", data=warm, content_type="application/json", headers=sign(warm))
        .status_code
        == 200
    )

    def send(worker: int) -> None:
        client = Client()
        try:
            for n in range(COMMENTS):
                word = ("alpha", "beta")[n % 2]
                payload = body(item(1000 * (worker + 1) + n, text=f"{word} please"))
                response = client.post(
                    "/webhooks/sandbox/", data=payload, content_type="application/json", headers=sign(payload)
                )
                assert response.status_code == 200, response.content
        except BaseException as exc:  # reported below
            failures.append(exc)
        finally:
            connection.close()

    def edit() -> None:
        try:
            for n in range(FLIPS):
                campaign_update(
                    campaign_id=flip.pk, changes={"keywords": [("beta", "alpha")[n % 2]]}, actor="editor_test"
                )
                time.sleep(0.02)  # a person's pace, so that the edits fall among the comments
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(w,)) for w in range(SENDERS)] + [
        threading.Thread(target=edit)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not failures, failures
    # After the last edit (its rule: "alpha"), one more of each word, on the same cached path.
    client = Client()
    for n, word in enumerate(("alpha", "beta")):
        payload = body(item(9000 + n, text=f"{word} please"))
        assert (
            client.post(
                "/webhooks/sandbox/", data=payload, content_type="application/json", headers=sign(payload)
            ).status_code
            == 200
        )
    return flip


@pytest.mark.django_db(transaction=True)
def test_every_event_records_the_rules_that_decided_it_while_a_rule_is_edited(sandbox_source):
    flip = _run(sandbox_source)
    assert _disagreements(sandbox_source) == []
    events = InboundEvent.objects.filter(source=sandbox_source)
    assert events.count() == SENDERS * COMMENTS + 3
    # The edits really landed among the comments: events were matched under several versions.
    versions = set(events.filter(trigger_campaign=flip.pk).values_list("trigger_campaign_version", flat=True))
    assert len(versions) >= 3, versions
    last = {
        e.message_text: e.trigger_campaign
        for e in events.filter(source_event_id__in=[item(9000)["id"], item(9001)["id"]])
    }
    assert last == {"alpha please": flip.pk, "beta please": None}


@pytest.mark.django_db(transaction=True)
def test_positive_control_rules_recorded_without_counting_the_version_are_caught(sandbox_source, monkeypatch):
    """Break the guard: each edit records its rules under the version already in use instead of
    counting a new one. Ingest keeps the rules it holds for that version, and the check names the
    events whose recorded version says other rules than those that decided them."""
    from replies.services import campaigns

    monkeypatch.setattr(campaigns, "_rules_changed", campaigns._rules_recorded)
    _run(sandbox_source)
    wrong = _disagreements(sandbox_source)
    assert wrong, "the check found nothing with the version count broken"


def _edits_side_by_side(source, rounds: int) -> list[BaseException]:
    """An owner's copy edits (source, then campaign) and an editor's rule edits of the same
    every-post campaign, at once, `rounds` each: what failed."""
    from replies.services import reply_copy_create

    every = Campaign.objects.get(source=source, account_default=True)
    failures: list[BaseException] = []

    def run(work) -> None:
        try:
            for n in range(rounds):
                work(n)
        except BaseException as exc:  # reported by the caller
            failures.append(exc)
        finally:
            connection.close()

    copies = threading.Thread(
        target=run,
        args=(
            lambda n: reply_copy_create(
                source_id=source.pk,
                purpose="public_ack",
                channel="public_reply",
                text=f"text {n}",
                actor="owner_test",
            ),
        ),
    )
    rules = threading.Thread(
        target=run,
        args=(
            lambda n: campaign_update(
                campaign_id=every.pk, changes={"keywords": [f"word{n}"]}, actor="editor_test"
            ),
        ),
    )
    copies.start(), rules.start()
    copies.join(120), rules.join(120)
    return failures


@pytest.mark.django_db(transaction=True)
def test_copy_and_rule_edits_of_one_account_at_once_never_deadlock(sandbox_source):
    assert _edits_side_by_side(sandbox_source, 40) == []
    every = Campaign.objects.get(source=sandbox_source, account_default=True)
    assert every.version == 1 + 40 + 40  # each edit its own version, none lost


@pytest.mark.django_db(transaction=True)
def test_positive_control_locking_the_campaign_before_the_source_deadlocks(sandbox_source, monkeypatch):
    """Break the one lock order (the campaign's row first, the source's after it): the same edits
    at once deadlock, which the test above shows the order prevents."""
    from replies.services import campaigns

    def campaign_first(campaign_id: int):
        campaign = (
            Campaign.objects.select_for_update(no_key=True, of=("self",))
            .select_related("source")
            .get(pk=campaign_id)
        )
        time.sleep(0.01)  # the window the crossed order leaves open, held open
        Source_ = type(campaign.source)
        Source_.objects.select_for_update(no_key=True).filter(pk=campaign.source_id).values_list("pk").get()
        return campaign

    monkeypatch.setattr(campaigns, "_locked", campaign_first)
    failures = _edits_side_by_side(sandbox_source, 40)
    assert any("deadlock detected" in str(f) for f in failures), failures
