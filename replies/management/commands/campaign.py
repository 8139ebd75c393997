"""campaign: make, list, preview and switch campaigns from the command line (the admin's Campaigns page too)."""

from __future__ import annotations

import json
from datetime import datetime

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from ingress.models import Source
from replies.matching import campaign_preview
from replies.models import Campaign
from replies.services import CampaignRefused, campaign_create, campaign_state_set

ACTOR = "campaign command"
MOVES = {"activate": "active", "pause": "paused", "end": "ended"}


def _time(value: str, flag: str) -> datetime:
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(
            f"{flag} takes an ISO 8601 time, e.g. 2026-12-24T09:00:00+00:00; got {value!r}"
        ) from None
    if when.tzinfo is None:
        raise CommandError(f"{flag} needs a UTC offset (e.g. +00:00): {value!r}")
    return when


class Command(BaseCommand):
    help = (
        "Campaigns: which comments, on which posts, get which approved reply. "
        "`create` makes one (a draft unless --activate), `list` shows them, `preview` shows what it "
        "would match among the last recorded comments, `activate`, `pause` and `end` switch one."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True)
        create = sub.add_parser("create", help="make a campaign")
        create.add_argument("name")
        create.add_argument("--source", required=True, help="the source (account) it runs on, by name")
        scope = create.add_mutually_exclusive_group(required=True)
        scope.add_argument(
            "--post", action="append", dest="posts", metavar="ID", help="a post or media id (repeat for more)"
        )
        scope.add_argument("--every-post", action="store_true", help="every post of the account")
        rule = create.add_mutually_exclusive_group(required=True)
        rule.add_argument(
            "--keyword",
            action="append",
            dest="keywords",
            metavar="WORD",
            help="a keyword matched as a whole word, ignoring case (repeat: any of them)",
        )
        rule.add_argument("--any-comment", action="store_true", help="every comment matches")
        create.add_argument(
            "--top-level-only", action="store_true", help="only comments on the post, not replies to comments"
        )
        create.add_argument(
            "--copy",
            action="append",
            required=True,
            dest="copies",
            metavar="PURPOSE=TEXT",
            help="approved copy for a purpose; repeat a purpose for variants that rotate by reply",
        )
        create.add_argument(
            "--channel",
            action="append",
            default=[],
            metavar="PURPOSE=CHANNEL",
            help="a purpose's channel label",
        )
        create.add_argument("--starts", help="ISO 8601 start (default: now)")
        create.add_argument("--ends", help="ISO 8601 end (default: none)")
        create.add_argument("--activate", action="store_true", help="make it active at once")
        listing = sub.add_parser("list", help="list campaigns")
        listing.add_argument("--source", help="only this source's")
        listing.add_argument("--json", action="store_true", help="as JSON")
        preview = sub.add_parser("preview", help="what it would match among recorded comments")
        preview.add_argument("name")
        preview.add_argument("--last", type=int, default=20, help="how many recorded comments (default 20)")
        for verb in MOVES:
            move = sub.add_parser(verb, help=f"{verb} a campaign")
            move.add_argument("name")

    def handle(self, *args, **options) -> None:
        try:
            getattr(self, f"_{options['verb'].replace('-', '_')}", self._move)(options)
        except CampaignRefused as refused:
            raise CommandError(str(refused)) from None

    @staticmethod
    def _campaign(name: str) -> Campaign:
        campaign = Campaign.objects.filter(name=name).select_related("source").first()
        if campaign is None:
            known = ", ".join(Campaign.objects.order_by("name").values_list("name", flat=True)[:10]) or "none"
            raise CommandError(f"no campaign named {name!r} (campaigns: {known})")
        return campaign

    def _create(self, options: dict) -> None:
        source = Source.objects.filter(name=options["source"]).first()
        if source is None:
            raise CommandError(f"no source named {options['source']!r}")
        copies: dict[str, list[str]] = {}
        for value in options["copies"]:
            purpose, sep, text = value.partition("=")
            if not sep or not purpose.strip() or not text.strip():
                raise CommandError(f"--copy takes PURPOSE=TEXT, got {value!r}")
            copies.setdefault(purpose.strip(), []).append(text.strip())
        channels = {}
        for value in options["channel"]:
            purpose, sep, channel = value.partition("=")
            if not sep or not purpose.strip() or not channel.strip():
                raise CommandError(f"--channel takes PURPOSE=CHANNEL, got {value!r}")
            if purpose.strip() not in copies:
                raise CommandError(f"--channel names {purpose.strip()!r}, which has no --copy")
            channels[purpose.strip()] = channel.strip()
        campaign = campaign_create(
            name=options["name"],
            source_id=source.pk,
            every_post=options["every_post"],
            posts=options["posts"] or [],
            keywords=options["keywords"] or [],
            any_comment=options["any_comment"],
            top_level_only=options["top_level_only"],
            copies=copies,
            channels=channels,
            starts_at=_time(options["starts"], "--starts") if options["starts"] else None,
            ends_at=_time(options["ends"], "--ends") if options["ends"] else None,
            activate=options["activate"],
            actor=ACTOR,
        )
        self.stdout.write(f"campaign {campaign.name!r}: {campaign.state}, version {campaign.version}")

    def _list(self, options: dict) -> None:
        campaigns = Campaign.objects.select_related("source").order_by("source__name", "name")
        if options["source"]:
            campaigns = campaigns.filter(source__name=options["source"])
        rows = [
            {
                "name": c.name,
                "source": c.source.name,
                "state": c.state,
                "version": c.version,
                "scope": "every post" if c.every_post else c.posts,
                "rule": "any comment" if c.any_comment else c.keywords,
                "top_level_only": c.top_level_only,
                "purposes": c.purposes or c.source.purposes,
                "starts_at": c.starts_at.isoformat(),
                "ends_at": c.ends_at.isoformat() if c.ends_at else None,
            }
            for c in campaigns
        ]
        if options["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        if not rows:
            self.stdout.write("no campaigns")
            return
        for row in rows:
            scope = row["scope"] if isinstance(row["scope"], str) else f"posts {', '.join(row['scope'])}"
            rule = (
                row["rule"]
                if isinstance(row["rule"], str)
                else f"keywords {', '.join(row['rule']) or '(none)'}"
            )
            self.stdout.write(
                f"{row['name']}  [{row['state']}, v{row['version']}]  source {row['source']}; {scope}; {rule}"
                + ("; top-level only" if row["top_level_only"] else "")
            )

    def _preview(self, options: dict) -> None:
        if options["last"] < 1 or options["last"] > 1000:
            raise CommandError("--last is 1 to 1000")
        campaign = self._campaign(options["name"])
        rows = campaign_preview(campaign_id=campaign.pk, last=options["last"])
        if not rows:
            self.stdout.write("no recorded comments in this campaign's scope")
        for row in rows:
            self.stdout.write(f"{row.event_key}  {'MATCH' if row.matched else 'no   '}  {row.why}")

    def _move(self, options: dict) -> None:
        campaign = self._campaign(options["name"])
        campaign = campaign_state_set(campaign_id=campaign.pk, state=MOVES[options["verb"]], actor=ACTOR)
        self.stdout.write(
            f"campaign {campaign.name!r}: {campaign.state} at {timezone.now():%Y-%m-%d %H:%M:%S} UTC"
        )
