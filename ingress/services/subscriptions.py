"""Whether the platforms still deliver: each shared-callback source's subscription and token read back."""

from __future__ import annotations

import logging
from datetime import datetime

from django.utils import timezone

from conduit.credentials import CredentialUndecryptable
from conduit.providers.registry import callback_adapters, get_adapter
from ingress.models import Source
from ingress.selectors import source_config

logger = logging.getLogger("conduit.ingress")


def _read_back(source: Source, *, now: datetime, timeout: float, problem: str = "") -> str:
    """Read the source's subscription and token expiry back (unless `problem` is already known),
    record what is wrong on the source and log it; returns it ("" when nothing is)."""
    adapter = get_adapter(source.adapter)
    try:
        config = source_config(source, with_token=True)
    except CredentialUndecryptable:
        config, problem = None, "the stored access token decrypts under no configured key"
    if not problem:
        problem = adapter.subscription_problem(
            account=source.account_ref,
            app_id=source.app_id,
            event_types=config.event_types,
            base_url=source.source_url,
            access_token=config.access_token,
            now=now,
            timeout=timeout,
        )
    problem = problem[:256]
    Source.objects.filter(pk=source.pk).update(subscription_checked_at=now, subscription_problem=problem)
    if problem:
        logger.warning(
            "%s subscription source=%s problem=%s", adapter.shared_callback.platform, source.name, problem
        )
    return problem


def subscriptions_check(*, timeout: float = 10.0, now: datetime | None = None) -> dict[str, str]:
    """Read each shared-callback source's subscription and its token's expiry (the adapter's
    `subscription_problem`), and record what is wrong: {source name: problem or ""}.

    Run by `doctor` and daily by the schedule (a platform may unsubscribe an app silently, and
    tokens expire). Canary sources are left out (their platform is the simulator a canary run starts).
    """
    now = now or timezone.now()
    return {
        source.name: _read_back(source, now=now, timeout=timeout)
        for source in Source.objects.filter(adapter__in=callback_adapters(), canary=False).order_by("name")
    }


def source_subscribe(*, source_id: int, timeout: float = 10.0, now: datetime | None = None) -> str:
    """Subscribe the source's app to the fields its event types need (the adapter's `subscribe`),
    then read the subscription back, as connecting and reconnecting do: "" when it is verified,
    else what is wrong (Meta's refusal by code, or what the read-back found), recorded on the
    source as the daily check records it. Never reported subscribed on Meta's word alone.

    ValueError for a source whose platform has no app subscription.
    """
    source = Source.objects.get(pk=source_id)
    subscribe = getattr(get_adapter(source.adapter), "subscribe", None)
    if subscribe is None or source.adapter not in callback_adapters():
        raise ValueError(f"source {source.name!r}: its platform has no app subscription to ask for")
    try:
        config = source_config(source, with_token=True)
    except CredentialUndecryptable as exc:
        raise ValueError(f"source {source.name!r}: {exc}") from None
    refused = subscribe(
        account=source.account_ref,
        event_types=config.event_types,
        base_url=source.source_url,
        access_token=config.access_token,
        timeout=timeout,
    )
    problem = _read_back(source, now=now or timezone.now(), timeout=timeout, problem=refused)
    logger.info("source=%s subscribed and verified=%s", source.name, "no" if problem else "yes")
    return problem
