"""The ranged settings, in one table, and the system check that refuses to start outside them.

`manage.py check`, runserver, migrate, qcluster and `manage.py worker` run Django's system
checks before they do anything, so a value out of its range stops the process with the setting,
its range and the value named, instead of failing inside the first poll (an interval of 0 made
every new source's scan state refuse its insert, and no source was scanned).

Pure data and one check: no app is imported (conduit is the ground floor); reconcile's models
and staging read their bounds from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# docs/concepts/reconciliation.md#scheduling: a source's interval is 1 s to 1 year. The scan state's check
# constraint (reconcile.models, scan_interval_range) holds the same bound.
MAX_INTERVAL_SECONDS = 365 * 24 * 3600

CHECK_ID = "conduit.E001"


@dataclass(frozen=True)
class SettingRange:
    """A setting's accepted values: low to high inclusive (high None: no upper bound), as the
    README's configuration table words them. `optional`: unset (None) takes the default."""

    setting: str
    low: int
    high: int | None
    words: str
    optional: bool = False

    def refusal(self, value: Any) -> str | None:
        """Why `value` is refused (the setting, its range and the value named), or None."""
        if value is None and self.optional:
            return None
        whole = isinstance(value, int) and not isinstance(value, bool)
        if whole and self.low <= value and (self.high is None or value <= self.high):
            return None
        bounds = f"{self.low} or more" if self.high is None else f"{self.low} to {self.high}"
        return f"{self.setting} is {value!r}, outside its range {self.words} ({bounds})"


# Every setting with a range, as the README's configuration table states it.
SETTING_RANGES: dict[str, SettingRange] = {
    r.setting: r
    for r in (
        SettingRange("CONDUIT_RECONCILE_INTERVAL_SECONDS", 1, MAX_INTERVAL_SECONDS, "1 s to 1 year"),
        SettingRange("CONDUIT_RECONCILE_POLL_LIMIT", 1, 200, "1 to 200"),
        SettingRange("CONDUIT_RECONCILE_PAGE_SIZE", 1, 5000, "1 to 5000"),
        SettingRange("CONDUIT_RECONCILE_MAX_PAGES", 1, 100_000, "1 to 100,000", optional=True),
        SettingRange("CONDUIT_RECONCILE_MAX_STAGED_ITEMS", 1, 20_000_000, "1 to 20,000,000", optional=True),
        SettingRange("CONDUIT_RECONCILE_MAX_STAGED_BYTES", 1, 16 * 1024**3, "1 to 16 GiB", optional=True),
        SettingRange("CONDUIT_META_WEBHOOK_MAX_BYTES", 1, None, "at least 1 byte"),
    )
}


def range_refusal(setting: str, value: Any) -> str | None:
    """`SETTING_RANGES[setting].refusal(value)`: for a caller that checks before Django is set up."""
    return SETTING_RANGES[setting].refusal(value)


def settings_in_range(app_configs=None, **kwargs) -> list:
    """The system check: one error per ranged setting outside its range."""
    from django.conf import settings
    from django.core import checks

    errors = []
    for entry in SETTING_RANGES.values():
        refusal = entry.refusal(getattr(settings, entry.setting, None))
        if refusal:
            errors.append(
                checks.Error(
                    refusal,
                    id=CHECK_ID,
                    hint=f"{entry.setting} accepts {entry.words}"
                    f"{'; unset, it takes its default' if entry.optional else ''}.",
                )
            )
    return errors
