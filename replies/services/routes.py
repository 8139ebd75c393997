"""Reply routes: where each purpose of a source is sent, declared and edited."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from conduit.providers.registry import TRANSPORTS, get_adapter, transports_for
from ingress.models import Source
from replies.models import ReplyRoute
from replies.transports import live_enable_refusals, route_url_refusal

# --- reply routes --------------------------------------------------------------------------


class RouteConflict(Exception):
    """A declaration that would silently change an existing route."""


class LiveSendRefused(ValueError):
    """A route asked to go live while the acceptance contract or the connection's authorisation is missing."""


# What a declaration names; the live flag is the owner's, set only by reply_route_update.
ROUTE_FIELDS = ("transport_name", "target_url")


def _route_validated(route: ReplyRoute, source: Source) -> ReplyRoute:
    errors = {}
    if route.purpose not in source.purposes:
        errors["purpose"] = f"{route.purpose!r} is not a declared purpose of source {source.name!r}"
    if route.transport_name not in TRANSPORTS:
        errors["transport_name"] = f"unknown transport; known: {', '.join(sorted(TRANSPORTS))}"
    elif route.transport_name not in transports_for(source.adapter):
        errors["transport_name"] = (
            f"{route.transport_name!r} cannot answer a {source.adapter!r} source; it may use: "
            + ", ".join(sorted(transports_for(source.adapter)))
        )
    else:
        refusal = route_url_refusal(route.transport_name, route.target_url)
        if refusal:
            errors["target_url"] = refusal
    if errors:
        raise ValidationError(errors)
    route.full_clean(exclude=["source"], validate_unique=False, validate_constraints=False)
    return route


def reply_route_declare(
    *, source_id: int, purpose: str, transport_name: str, target_url: str = ""
) -> tuple[ReplyRoute, bool]:
    """Create a purpose's route, or confirm an identical one. Returns (route, created).

    Different values for an existing route are refused with RouteConflict
    naming each; edits are deliberate (reply_route_update, the admin).
    """
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)  # serializes declarations
        wanted = _route_validated(
            ReplyRoute(source=source, purpose=purpose, transport_name=transport_name, target_url=target_url),
            source,
        )
        existing = ReplyRoute.objects.filter(source=source, purpose=purpose).first()
        if existing is None:
            wanted.save()
            return wanted, True
    differences = [
        f"{f}: routed {getattr(existing, f)!r}, given {getattr(wanted, f)!r}"
        for f in ROUTE_FIELDS
        if getattr(existing, f) != getattr(wanted, f)
    ]
    if differences:
        raise RouteConflict(
            f"purpose {purpose!r} of source {source.name!r} is already routed otherwise; change the "
            "route in the admin if that is intended. " + "; ".join(differences)
        )
    return existing, False


def reply_routes_default(*, source_id: int) -> list[str]:
    """Give each declared purpose of the source that has no route yet its adapter's default
    (through the source's own URL), as registration does; a route a person set stays as it is.
    Returns the purposes routed now."""
    source = Source.objects.get(pk=source_id)
    defaults = get_adapter(source.adapter).default_routes
    routed = []
    for purpose in source.purposes:
        if purpose in defaults and not ReplyRoute.objects.filter(source=source, purpose=purpose).exists():
            reply_route_declare(
                source_id=source_id,
                purpose=purpose,
                transport_name=defaults[purpose],
                target_url=source.source_url,
            )
            routed.append(purpose)
    return routed


def reply_route_update(*, route_id: int, changes: dict) -> ReplyRoute:
    """Apply a person's edit to a route (transport, target, or the owner's live flag).

    Turning the live flag on, or pointing a live route somewhere else, is refused
    (LiveSendRefused, naming each missing requirement) unless the latest acceptance run passed
    on this code version and a person authorised the source's account connection
    (docs/concepts/acceptance.md#live). Turning it off is always allowed; a route already live
    keeps its flag through an upgrade (doctor says when its acceptance pass is not current).
    """
    allowed = {*ROUTE_FIELDS, "live_send_enabled"}
    unknown = set(changes) - allowed
    if unknown:
        raise ValueError(f"a route's {', '.join(sorted(unknown))} cannot be changed")
    with transaction.atomic():
        route = ReplyRoute.objects.select_for_update().select_related("source").get(pk=route_id)
        before = (route.live_send_enabled, *(getattr(route, f) for f in ROUTE_FIELDS))
        for name, value in changes.items():
            setattr(route, name, value)
        _route_validated(route, route.source)
        after = (route.live_send_enabled, *(getattr(route, f) for f in ROUTE_FIELDS))
        if route.live_send_enabled and after != before:
            refusals = live_enable_refusals(route)
            if refusals:
                raise LiveSendRefused(
                    f"live sending for {route.purpose!r} of source {route.source.name!r} stays off: "
                    + "; ".join(refusals)
                )
        route.save()
    return route
