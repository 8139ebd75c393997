"""Source registration, renames, edits, re-authorisation, the person's authorisation of the
account connection, and the signing secret a source names."""

from __future__ import annotations

import logging
from typing import Any, Mapping

from django.db import transaction
from django.utils import timezone

from conduit.credentials import CredentialUndecryptable
from conduit.logging import register_secret
from conduit.loopback import credential_url_refusal
from conduit.process_secrets import credential_name_refusal, secret_read
from conduit.providers.base import SecretUnavailable
from conduit.providers.registry import ADAPTERS, get_adapter
from ingress.hooks import trigger_rules
from ingress.models import ENV_NAME, Source, SourceCredential
from ingress.selectors import source_config, source_identity_holder

logger = logging.getLogger("conduit.ingress")


def source_secret(source: Source) -> str:
    """The signing secret, read from the environment variable the source names (or held by this
    process for a run, as the canary holds its own: conduit.process_secrets)."""
    value = secret_read(source.secret_env)
    if not value:
        raise SecretUnavailable(f"environment variable {source.secret_env} is not set")
    register_secret(value)  # the log boundary withholds any record that carries it
    return value


class SourceConflict(Exception):
    """A registration or edit that would move a source's identity silently."""


# docs/platforms/sources.md#immutable: "Registrations are immutable for one runtime instance."
# What a source is (its platform, account, contract and whether it is a test source) never changes
# after registration; a different one is a new source.
IMMUTABLE_FIELDS = ("adapter", "account_ref", "contract_version", "canary")
MAX_NAME_LENGTH = 64  # event types, purposes and trigger keywords: their columns' width

REGISTERED_FIELDS = (
    "adapter",
    "account_ref",
    "event_types",
    "contract_version",
    "purposes",
    "retention_days",
    "secret_env",
    "canary",
    "source_url",
    "app_id",
    "secret_env_next",
    "verify_token_env",
    "token_env",
)
# Sources of one Meta app that take the same object are verified by one callback: they
# must name the same secret and verify-token variables.
APP_SHARED_FIELDS = ("secret_env", "secret_env_next", "verify_token_env")


# The source's fields that name a credential variable.
CREDENTIAL_FIELDS = ("secret_env", "secret_env_next", "verify_token_env", "token_env")
# What the source acts as the account with: a change is another connection, which a person has not
# authorised yet (the signing secrets only prove what the platform delivers, so they are not here).
CONNECTION_FIELDS = ("token_env", "app_id")


def source_door_refusals(source: Source) -> dict[str, str]:
    """What a source names that the deployment does not allow, by field: a credential variable
    not declared for credentials, or a read URL its token may not be sent to."""
    errors = {}
    for name in CREDENTIAL_FIELDS:
        value = getattr(source, name)
        # A value that is no variable name at all is the field's own error (ENV_NAME).
        refusal = credential_name_refusal(value) if value and ENV_NAME.regex.fullmatch(value) else ""
        if refusal:
            errors[name] = refusal
    hosts = get_adapter(source.adapter).credential_hosts if source.adapter in ADAPTERS else None
    if hosts is not None and source.source_url:
        refusal = credential_url_refusal(source.source_url, hosts)
        if refusal:
            errors["source_url"] = f"the access token would be sent there: {refusal}"
    return errors


def _dedupe(values: list[str]) -> list[str]:
    return list(dict.fromkeys(v.strip() for v in values if v.strip()))


def _validated(source: Source, *, credential_follows: bool = False) -> Source:
    """The source as it will be stored, or ValidationError by field. A shared-callback source
    names its token's variable unless its token is stored (`credential_follows`: a connect
    stores it in the same transaction)."""
    from django.core.exceptions import ValidationError

    try:
        adapter = get_adapter(source.adapter)
    except KeyError as exc:
        raise ValidationError({"adapter": str(exc.args[0])}) from None
    source.source_system = adapter.source_system
    source.event_types = _dedupe(source.event_types)
    source.purposes = _dedupe(source.purposes)
    errors = {}
    if not source.event_types:
        errors["event_types"] = "allowlist at least one event type"
    for name in ("event_types", "purposes"):
        bad = [v for v in getattr(source, name) if len(v) > MAX_NAME_LENGTH or not v.isprintable()]
        if bad:
            errors[name] = (
                f"each entry is printable and at most {MAX_NAME_LENGTH} characters; "
                f"{len(bad)} entr{'y is' if len(bad) == 1 else 'ies are'} not"
            )
    bad = [p for p in source.purposes if not p.replace("_", "").isalnum() or not p.islower()]
    if bad:
        errors["purposes"] = f"purposes are lower-case words with underscores: {', '.join(bad)}"
    if adapter.shared_callback is not None:
        for name, flag in (
            ("app_id", "--meta-app-id"),
            ("verify_token_env", "--verify-token-env"),
            ("token_env", "--token-env"),
        ):
            if not getattr(source, name) and not (
                name == "token_env" and _token_stored(source, credential_follows)
            ):
                errors[name] = f"a {adapter.shared_callback.label} source needs {flag}"
    elif source.app_id or source.verify_token_env:
        errors["app_id"] = "only Meta sources have a Meta app id and verify token"
    if source.secret_env_next and source.secret_env_next == source.secret_env:
        errors["secret_env_next"] = "the second secret names another variable than the first"
    errors.update(source_door_refusals(source))
    if errors:
        raise ValidationError(errors)
    source.full_clean(validate_unique=False, validate_constraints=False)
    return source


def _token_stored(source: Source, follows: bool) -> bool:
    return follows or (
        source.pk is not None and SourceCredential.objects.filter(source_id=source.pk).exists()
    )


def _app_conflict(source: Source) -> str:
    """Why `source` cannot join its Meta app's callback, or "" (the first differing source named)."""
    if not source.app_id:
        return ""
    siblings = Source.objects.filter(app_id=source.app_id, adapter=source.adapter).exclude(pk=source.pk)
    for sibling in siblings.order_by("pk"):
        differing = [f for f in APP_SHARED_FIELDS if getattr(sibling, f) != getattr(source, f)]
        if differing:
            return (
                f"source {sibling.name!r} of Meta app {source.app_id} takes the same object and names "
                + "; ".join(f"{f} {getattr(sibling, f)!r} (given {getattr(source, f)!r})" for f in differing)
                + ": one callback verifies them all, so they must name the same variables"
            )
    return ""


def source_register(
    *,
    name: str,
    adapter: str,
    account_ref: str,
    event_types: list[str],
    purposes: list[str],
    secret_env: str,
    trigger_keywords: list[str] | None = None,
    contract_version: str = "event-v1",
    retention_days: int = 30,
    canary: bool = False,
    source_url: str = "",
    app_id: str = "",
    secret_env_next: str = "",
    verify_token_env: str = "",
    token_env: str = "",
    credential_follows: bool = False,
) -> tuple[Source, bool]:
    """Create a source, confirm an identical one, or rename one. Returns (source, created).

    docs/platforms/sources.md#rename: "Registering the same namespace and Scope under a new name is a
    renamed configuration entry: the stored source, checkpoint and history move
    to the new name and the old name is released." A new name for a registered
    identity (platform and account) whose other registered fields all match
    renames that source (`source_rename`): the row keeps its primary key, so its
    events, replies, scan state and reports stay with it, and the returned
    source carries `renamed_from`, the name released. Conflicting values are
    refused with SourceConflict naming each field; edits go through the admin
    (source_update), where they are deliberate.
    Where its replies go is replies' (reply routes, replies.services.reply_route_declare).
    `trigger_keywords`, when given, are its every-post keyword list: the account-default campaign
    the trigger rules keep (ingress.hooks.trigger_rules), compared and set as a registered field.
    """
    wanted = _validated(
        Source(
            name=name,
            adapter=adapter,
            account_ref=account_ref,
            event_types=event_types,
            purposes=purposes,
            secret_env=secret_env,
            contract_version=contract_version,
            retention_days=retention_days,
            canary=canary,
            source_url=source_url,
            app_id=app_id,
            secret_env_next=secret_env_next,
            verify_token_env=verify_token_env,
            token_env=token_env,
        ),
        credential_follows=credential_follows,
    )
    with transaction.atomic():
        existing = Source.objects.select_for_update().filter(name=name).first()
        if existing is not None:
            differences = _registered_differences(existing, wanted, trigger_keywords)
            if differences:
                raise SourceConflict(
                    f"source {name!r} is already registered with other values; change it in the "
                    "admin if that is intended. " + "; ".join(differences)
                )
            return existing, False
        owner = source_identity_holder(adapter=wanted.adapter, account_ref=wanted.account_ref)
        if owner is not None:
            return source_rename(
                source_id=owner.pk, name=name, registered=wanted, trigger_keywords=trigger_keywords
            ), False
        conflict = _app_conflict(wanted)
        if conflict:
            raise SourceConflict(conflict)
        if get_adapter(wanted.adapter).backfills:
            # What the account held before now is history a scan records, never new work.
            wanted.connected_at = timezone.now()
        wanted.save()
        # Its first rules (its keywords' every-post campaign, or none), recorded as version 1.
        trigger_rules().keywords_set(
            source=wanted, keywords=trigger_keywords or [], actor="registration", registering=True
        )
    logger.info("source registered name=%s adapter=%s", wanted.name, wanted.adapter)
    return wanted, True


def _registered_differences(
    registered: Source, given: Source, trigger_keywords: list[str] | None = None
) -> list[str]:
    """Each registered field whose value differs between the stored source and a registration
    (its every-post keywords too, when the registration names them)."""
    differences = [
        f"{f}: registered {getattr(registered, f)!r}, given {getattr(given, f)!r}"
        for f in REGISTERED_FIELDS
        if getattr(registered, f) != getattr(given, f)
    ]
    if trigger_keywords is not None:
        held = trigger_rules().keywords_of(registered)
        if held != _dedupe(trigger_keywords):
            differences.append(f"trigger_keywords: registered {held!r}, given {_dedupe(trigger_keywords)!r}")
    return differences


def source_rename(
    *, source_id: int, name: str, registered: Source, trigger_keywords: list[str] | None = None
) -> Source:
    """The rename of docs/platforms/sources.md#rename: the source registered again under `name`
    with the same values.

    Runs inside source_register's transaction, which holds `name` free. Every
    registered field but the name must match (`registered`, validated), else
    SourceConflict names each difference, as a registration under the source's
    own name would. The row keeps its primary key: events, replies, scan state
    and reports point at it, not at its name. Webhooks for the old name answer
    404 from then on and the name is free for a new registration (its
    /webhooks/<name>/ path moves with it; a Meta app's callback is per app id).
    Returns the source with `renamed_from` set to the name released.
    """
    # FOR UPDATE, not NO KEY: the name is a unique key, so the UPDATE below takes this lock
    # anyway; taken at once, it is never an upgrade (which could deadlock with a key-share holder).
    source = Source.objects.select_for_update(no_key=False).get(pk=source_id)
    differences = _registered_differences(source, registered, trigger_keywords)
    if differences:
        raise SourceConflict(
            f"account {source.account_ref!r} of {source.source_system} is already registered as source "
            f"{source.name!r} with other values: registering it as {name!r} renames it only when every "
            "other value matches (change them in the admin first if that is intended). "
            + "; ".join(differences)
        )
    old = source.name
    source.name = name
    source.save(update_fields=["name", "updated_at"])
    source.renamed_from = old
    transaction.on_commit(
        lambda: logger.info(
            "source renamed name=%s from=%s adapter=%s id=%s", name, old, source.adapter, source.pk
        )
    )
    return source


def source_update(*, source_id: int, changes: Mapping[str, Any]) -> Source:
    """Apply an edit made by a person. Identity cannot move once events exist.

    Renaming keeps all history (events point at the source row, not its name).
    `trigger_keywords` in `changes` sets the source's every-post keyword list (its account-default
    campaign: a change is a new trigger rule version).
    """
    changes = dict(changes)
    keywords = changes.pop("trigger_keywords", None)
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)
        before = {f: getattr(source, f) for f in (*IMMUTABLE_FIELDS, *CONNECTION_FIELDS)}
        for name, value in changes.items():
            setattr(source, name, value)
        _validated(source)
        moved = [f for f in IMMUTABLE_FIELDS if getattr(source, f) != before[f]]
        if moved:
            raise SourceConflict(
                f"the {', '.join(moved)} of source {source.name!r} cannot change after registration: "
                "a source's platform, account, contract version and canary flag are what its events "
                "and replies were accepted under (a canary flag switched on would suppress a live "
                "source's approved replies). Register a new source instead."
            )
        clash = source_identity_holder(
            adapter=source.adapter, account_ref=source.account_ref, other_than=source.pk
        )
        if clash is not None:
            raise SourceConflict(f"account {source.account_ref!r} is already source {clash.name!r}")
        conflict = _app_conflict(source)
        if conflict:
            raise SourceConflict(conflict)
        if any(getattr(source, f) != before[f] for f in CONNECTION_FIELDS):
            source.connection_authorized_by, source.connection_authorized_at = "", None
        source.save()
        if keywords is not None:
            trigger_rules().keywords_set(source=source, keywords=keywords, actor="source edit")
        source.refresh_from_db()
    return source


def source_rules_version_next(*, source_id: int) -> int:
    """The source's trigger rules changed (a campaign, replies'): count their version up, in the
    caller's transaction; the new version. A NO KEY update: ingest's inserts keep their KEY SHARE."""
    from django.db.models import F

    Source.objects.filter(pk=source_id).update(trigger_rule_version=F("trigger_rule_version") + 1)
    return Source.objects.filter(pk=source_id).values_list("trigger_rule_version", flat=True).get()


def source_reauthorized(*, source_id: int, actor: str) -> Source:
    """A person replaced a source's access token: clear `needs_reauth` so its waiting sends resume.

    Refused (ValueError) while the source has no token (none stored, its variable empty), or when
    a Graph call with the new token fails (the adapter's `token_verify`, made before the flag is
    cleared, with Conduit's words for why): clearing the flag then would only send into the same
    refusal. The waiting actions keep their reply keys and states, so nothing is sent twice; the
    sender's schedule picks them up.
    """
    source = Source.objects.get(pk=source_id)
    try:
        token = source_config(source, with_token=True).access_token
    except CredentialUndecryptable as exc:
        raise ValueError(f"source {source.name!r}: {exc}") from None
    if not token:
        raise ValueError(
            f"source {source.name!r} has no access token (none stored, none in its variable "
            f"{source.token_env or '(none named)'}): set the new token first"
        )
    verify = getattr(get_adapter(source.adapter), "token_verify", None)
    if verify is not None:
        problem = verify(
            base_url=source.source_url, account=source.account_ref, access_token=token, timeout=10.0
        )
        if problem:
            raise ValueError(f"source {source.name!r} stays waiting: {problem}")
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)
        Source.objects.filter(pk=source_id).update(needs_reauth=False)
        source.needs_reauth = False
    logger.info("source=%s re-authorised by actor=%s", source.name, actor)
    return source


def source_connection_authorize(*, source_id: int, actor: str) -> Source:
    """A person authorises the account connection of a source (seed 000: account connection is a
    human-only step): who and when are recorded, and its reply routes may then go live once the
    acceptance contract passed too (docs/concepts/acceptance.md#live).

    Refused (ValueError) without a person's name, or when the connection is already authorised
    (the first authorisation stays on record). A change of the credentials the source acts with
    (CONNECTION_FIELDS) clears the authorisation (source_update).
    """
    if not actor.strip():
        raise ValueError("an account connection is authorised by a person: name them")
    with transaction.atomic():
        source = Source.objects.select_for_update().get(pk=source_id)
        if source.connection_authorized_at is not None:
            raise ValueError(
                f"the account connection of source {source.name!r} was already authorised by "
                f"{source.connection_authorized_by} at {source.connection_authorized_at.isoformat()}"
            )
        source.connection_authorized_by, source.connection_authorized_at = actor, timezone.now()
        source.save(update_fields=["connection_authorized_by", "connection_authorized_at", "updated_at"])
    logger.info("source=%s account connection authorised by actor=%s", source.name, actor)
    return source


def source_connection_clear(*, source_id: int) -> None:
    """No connection time: every item the source shows counts as new work, however old (the
    canary's fixed fixture), instead of history from before the source was connected."""
    Source.objects.filter(pk=source_id).update(connected_at=None)


def source_reauth_require(*, source_id: int) -> bool:
    """The platform refused the source's access token: mark it `needs_reauth`, so its sends wait
    until a person re-authorises it (source_reauthorized). True when this call marked it."""
    return bool(Source.objects.filter(pk=source_id, needs_reauth=False).update(needs_reauth=True))
