"""Whether the platforms still deliver: each shared-callback source's subscription and token read back."""

from __future__ import annotations

import logging
from datetime import datetime

from django.utils import timezone

from conduit.providers.registry import callback_adapters, get_adapter
from ingress.models import Source
from ingress.selectors import source_config

logger = logging.getLogger("conduit.ingress")


def subscriptions_check(*, timeout: float = 10.0, now: datetime | None = None) -> dict[str, str]:
    """Read each shared-callback source's subscription and its token's expiry (the adapter's
    `subscription_problem`), and record what is wrong: {source name: problem or ""}.

    Run by `doctor` and daily by the schedule (a platform may unsubscribe an app silently, and
    tokens expire). Canary sources are left out (their platform is the simulator a canary run starts).
    """
    now = now or timezone.now()
    found: dict[str, str] = {}
    for source in Source.objects.filter(adapter__in=callback_adapters(), canary=False).order_by("name"):
        config = source_config(source, with_token=True)
        problem = get_adapter(source.adapter).subscription_problem(
            account=source.account_ref,
            app_id=source.app_id,
            event_types=config.event_types,
            base_url=source.source_url,
            access_token=config.access_token,
            now=now,
            timeout=timeout,
        )[:256]
        Source.objects.filter(pk=source.pk).update(subscription_checked_at=now, subscription_problem=problem)
        if problem:
            logger.warning(
                "%s subscription source=%s problem=%s",
                get_adapter(source.adapter).shared_callback.platform,
                source.name,
                problem,
            )
        found[source.name] = problem
    return found
