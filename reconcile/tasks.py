"""django-q2 tasks for reconciliation: thin, each calls one service."""

from django.conf import settings

from reconcile.poll import reconcile_due


def reconcile_poll() -> int:
    """The schedule's bounded poll: at most CONDUIT_RECONCILE_POLL_LIMIT page calls."""
    return reconcile_due(limit=settings.CONDUIT_RECONCILE_POLL_LIMIT).page_calls


def purge_retained() -> int:
    """The daily retention schedule: blank retained content past each source's period."""
    from ingress.services import retention_purge
    from reconcile.retention import staging_purge

    return sum(retention_purge().values()) + staging_purge()


def subscriptions_check() -> int:
    """The daily schedule: read each source's app subscription; returns how many have a problem."""
    from ingress.services.subscriptions import subscriptions_check as check

    return sum(1 for problem in check().values() if problem)


def credentials_refresh() -> int:
    """The hourly schedule: keep each stored access token alive; returns how many were refused."""
    from ingress.services.credentials import credentials_refresh as refresh

    return sum(1 for outcome in refresh().values() if outcome == "refused")
