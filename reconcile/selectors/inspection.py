"""A source's health row in words: doctor's lines and the source page's inspection."""

from __future__ import annotations

from typing import Any

from reconcile.selectors.health import source_health


def age_words(seconds: int) -> str:
    """A wait for a person: "2 d 3 h", "3 h 5 min", "41 min", "20 s"."""
    days, rest = divmod(max(0, int(seconds)), 86400)
    hours, rest = divmod(rest, 3600)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {rest // 60} min"
    return f"{rest // 60} min" if rest >= 60 else f"{rest} s"


def cursor_words(cursor: str, *, shown: int = 200) -> str:
    """An opaque cursor for a person: whole when short, else its start and its size."""
    if not cursor:
        return "none: the generation's first page, read from the last complete checkpoint"
    size = len(cursor.encode("utf-8", "surrogatepass"))
    return cursor if len(cursor) <= shown else f"{cursor[:shown]}... ({size} bytes)"


def failure_words(row: dict[str, Any]) -> str:
    """The last page failure as doctor and the source's page show it: class/code, streak, message."""
    if not row["last_error_code"]:
        return "none"
    streak = f" ({row['failures']} in a row)" if row["failures"] > 1 else ""
    message = f": {row['last_error_message']}" if row.get("last_error_message") else ""
    return f"{row['last_error_class']}/{row['last_error_code']}{streak}{message}"


def source_inspection(source) -> list[tuple[str, str]]:
    """One source's inspection (docs/concepts/reconciliation.md#inspection) for its admin page, as
    (label, words) rows: what doctor prints for it, from the same health row (a handful of queries,
    no network call)."""
    from conduit.providers.registry import ADAPTERS

    if source.adapter not in ADAPTERS:  # no platform to declare its families: nothing to inspect
        return []
    rows = source_health(source_ids=[source.pk])
    if not rows:
        return []
    row = rows[0]
    scan = row["active_scan"]
    checkpoint = (
        f"{row['checkpoint']} (last complete scan {row['last_completed_at']})"
        if row["checkpoint"]
        else "none: no complete scan yet"
    )
    if scan:
        generation = (
            f"run {scan['run']} {scan['state']}{'' if scan['complete_scan'] else ' (window)'}, "
            f"scan id {scan['scan_id'] or '(none yet)'}, {scan['pages']} page(s), "
            f"{scan['staged_events']} staged"
        )
    else:
        generation = "none"
    limited = [
        f"{f['event_type']} ({f['recovery']}: {f['limitation']})"
        for f in row["families"]
        if f["recovery"] != "complete"
    ]
    reviews = (
        f"{row['reviews_waiting']} waiting, the oldest for {age_words(row['oldest_review_age_seconds'])} "
        f"(since {row['oldest_review_at']})"
        if row["reviews_waiting"]
        else "none waiting"
    )
    reasons = needs_a_person(row)
    return [
        ("Checkpoint", checkpoint),
        ("Active generation", generation),
        ("Active cursor", cursor_words(scan["cursor"]) if scan else "none"),
        ("Due", f"{row['due_at'] or 'not scheduled yet'}{' (requested)' if row['requested'] else ''}"),
        (
            "Last page failure",
            failure_words(row) + (f" at {row['last_error_at']}" if row["last_error_at"] else ""),
        ),
        (
            "Limited recovery",
            "yes: " + "; ".join(limited) if limited else "no: a complete scan recovers every declared family",
        ),
        ("Review queue", reviews),
        ("Live routes", live_routes_words(row["live_routes"])),
        ("Needs a person", "; ".join(reasons) if reasons else "no"),
    ]


def live_routes_words(routes: list[dict[str, Any]]) -> str:
    """A source's live routes in words: each purpose and transport, and what is missing now."""
    if not routes:
        return "none: no route sends live"
    return "; ".join(
        f"{r['purpose']} ({r['transport']}): "
        + (
            "acceptance passed on this code version, connection authorised"
            if not r["missing"]
            else "; ".join(r["missing"])
        )
        for r in routes
    )


def needs_a_person(row: dict[str, Any]) -> list[str]:
    """Why a source's health row needs a person (empty when it does not)."""
    reasons = []
    if row["needs_reauth"]:
        reasons.append(
            "needs re-authorisation: Meta refused its access token, so its sends wait; "
            "replace the token (manage.py credentials_store, or its variable), then clear the flag "
            "(Ingress > Sources)"
        )
    if row["last_error_class"] == "credentials":
        reasons.append(
            f"its access token was refused ({row['last_error_code']}): a person must "
            "re-authorise the source and store the new token (or set it in its variable)"
        )
    elif row["last_error_code"]:
        streak = f", {row['failures']} failure(s) in a row" if row["failures"] > 1 else ""
        reasons.append(f"last page failed ({row['last_error_class']}/{row['last_error_code']}{streak})")
    if row.get("subscription_problem"):
        reasons.append(f"Meta subscription: {row['subscription_problem']}")
    if row.get("reviews_waiting"):
        # Every live reply waits for a person's recorded approval
        # (docs/concepts/ledgers.md#reply-states): a waiting reply is a person's work, however
        # healthy the scan.
        reasons.append(
            f"{row['reviews_waiting']} repl{'y' if row['reviews_waiting'] == 1 else 'ies'} waiting "
            f"for review, the oldest for {age_words(row['oldest_review_age_seconds'] or 0)} "
            "(Replies > Review queue)"
        )
    for field, refusal in row.get("refused_settings", {}).items():
        reasons.append(f"{field} is refused ({refusal}): correct it in Ingress > Sources or Reply routes")
    for route in row.get("live_routes", []):
        # Live routes keep sending through an upgrade; a person decides: rerun acceptance, or turn
        # the route off (docs/concepts/acceptance.md#live).
        if route["missing"]:
            reasons.append(
                f"route {route['purpose']} is live while its enabling would be refused now "
                f"({'; '.join(route['missing'])})"
            )
    for key, words in (
        (
            "stranded_sends",
            "stranded send(s): failed before send, no longer retried automatically or exhausted",
        ),
        ("repairs_failed", "repair(s) failed in the last report"),
        ("unknown_sends", "unknown send(s) waiting"),
        ("quarantine_waiting", "quarantined input(s) waiting"),
        ("retry_candidates", "retry candidate(s) undecided"),
        (
            "unexpected_receipts",
            "unexpected receipt(s): the provider shows a reply Conduit closed, has not sent or never planned",
        ),
    ):
        if row[key]:
            reasons.append(f"{row[key]} {words}")
    return reasons
