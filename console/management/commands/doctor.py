"""doctor: each source's reconciliation health; exit 1 when something needs a person."""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandParser

from ingress.services.subscriptions import subscriptions_check
from reconcile.selectors import (
    age_words,
    cursor_words,
    failure_words,
    live_routes_words,
    needs_a_person,
    source_health,
)


def _replies(answers: str) -> str:
    return "plans no reply" if answers == "nothing" else f"a reply answers the {answers}"


class Command(BaseCommand):
    help = (
        "Print each source's health: checkpoint, active scan with its scan id and cursor, due time, last "
        "error (class, code, streak and Conduit's message), the review queue (replies waiting, the oldest's "
        "age), stranded and unknown sends, failed repairs, quarantine waiting, retry candidates and "
        "unexpected receipts (a reply the provider shows that Conduit closed or never planned), where its access "
        "token comes from (stored encrypted: its last four characters, scopes and expiry; or the variable "
        "named), each event "
        "family's declared recovery and loss limitation, whether recovery is limited, whose receipts "
        "reconciliation compares, and for "
        "Meta sources whether the app is still subscribed (read from Meta's subscribed_apps now), and each "
        "live reply route with what its enabling would miss now (an acceptance pass on this code version, "
        "the account connection's authorisation). "
        "Exits 1 when something needs a person."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the rows as JSON")
        parser.add_argument(
            "--no-meta-check",
            action="store_false",
            dest="check_subscriptions",
            help="do not read Meta sources' subscribed_apps (show the last check's result)",
        )

    def handle(self, *args, as_json: bool = False, check_subscriptions: bool = True, **options) -> None:
        if check_subscriptions:
            # Meta unsubscribes an app silently: read each Meta source's subscription now.
            subscriptions_check(timeout=10.0)
        rows = source_health()
        attention = {row["source"]: needs_a_person(row) for row in rows}
        if as_json:
            self.stdout.write(
                json.dumps([{**row, "needs_a_person": attention[row["source"]]} for row in rows], indent=2)
            )
        else:
            if not rows:
                self.stdout.write("no sources registered")
            for row in rows:
                scan = row["active_scan"]
                self.stdout.write(f"{row['source']} ({row['source_system']} {row['account_ref']})")
                checkpoint = (
                    f"{row['checkpoint']} (last complete scan {row['last_completed_at']})"
                    if row["checkpoint"]
                    else "none: no complete scan yet"
                )
                self.stdout.write(f"  checkpoint        {checkpoint}")
                if scan:
                    active = (
                        f"run {scan['run']} {scan['state']}"
                        f"{'' if scan['complete_scan'] else ' (window)'}, {scan['pages']} page(s), "
                        f"{scan['staged_events']} staged"
                    )
                else:
                    active = "none"
                self.stdout.write(f"  active scan       {active}")
                if scan:
                    self.stdout.write(f"  scan id           {scan['scan_id'] or '(none yet)'}")
                    self.stdout.write(f"  cursor            {cursor_words(scan['cursor'])}")
                self.stdout.write(
                    f"  due               {row['due_at'] or 'not scheduled yet'}"
                    f"{' (requested)' if row['requested'] else ''}"
                )
                self.stdout.write(f"  last error        {failure_words(row)}")
                waiting = row["reviews_waiting"]
                self.stdout.write(
                    f"  review queue      {waiting} waiting"
                    + (
                        f", the oldest for {age_words(row['oldest_review_age_seconds'])} (since {row['oldest_review_at']})"
                        if waiting
                        else ""
                    )
                )
                self.stdout.write(f"  stranded sends    {row['stranded_sends']}")
                self.stdout.write(f"  repairs failed    {row['repairs_failed']}")
                self.stdout.write(f"  unknown sends     {row['unknown_sends']}")
                self.stdout.write(f"  quarantine        {row['quarantine_waiting']}")
                self.stdout.write(f"  retry candidates  {row['retry_candidates']}")
                self.stdout.write(
                    f"  unexpected receipts {row['unexpected_receipts']}"
                    f"{' (Reconciliation > Findings, queue: unexpected receipts)' if row['unexpected_receipts'] else ''}"
                )
                self.stdout.write(f"  access token      {row['access_token']}")
                if row["source_system"].startswith("meta-"):
                    self.stdout.write(f"  subscription      {row['subscription_problem'] or 'ok'}")
                for family in row["families"]:
                    limitation = f": {family['limitation']}" if family["limitation"] else ""
                    self.stdout.write(
                        f"  family            {family['event_type']} recovery {family['recovery']}, "
                        f"{_replies(family['answers'])}{limitation}"
                    )
                limited = [f["event_type"] for f in row["families"] if f["recovery"] != "complete"]
                self.stdout.write(f"  limited recovery  {'yes: ' + ', '.join(limited) if limited else 'no'}")
                compared = row["receipts_compared_for"]
                self.stdout.write(
                    f"  receipts compared {compared if isinstance(compared, str) else ', '.join(compared)}"
                    " (other routes' sends are left as they are: not compared)"
                )
                self.stdout.write(f"  live routes       {live_routes_words(row['live_routes'])}")
                reasons = attention[row["source"]]
                self.stdout.write(f"  needs a person    {'; '.join(reasons) if reasons else 'no'}")
        if any(attention.values()):
            sys.exit(1)
