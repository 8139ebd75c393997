"""The system check on stored credentials: Conduit refuses to start when it holds credentials and
no key is set, or a key is not one, instead of failing at the first send; a credential no key
decrypts is warned of at start, naming its sources (their sends fail before send until then). manage.py's commands (the worker's included) run it first; the web
process runs `manage.py check` before gunicorn (deploy/entrypoint.sh)."""

from __future__ import annotations

from django.core import checks
from django.db import DatabaseError

from conduit.credentials import key_refusal

KEYS_MISSING = "ingress.E001"
KEY_INVALID = "ingress.E002"
UNDECRYPTABLE = "ingress.W001"


def credentials_readable(app_configs=None, **kwargs) -> list:
    from django.conf import settings

    from ingress.models import SourceCredential
    from ingress.services.credentials import credentials_unreadable

    keys = settings.CONDUIT_CREDENTIAL_KEYS
    refusal = key_refusal(keys)
    if refusal:
        return [
            checks.Error(
                refusal, id=KEY_INVALID, hint="Give Fernet keys, comma-separated, the new one first."
            )
        ]
    try:
        stored = SourceCredential.objects.count()
        if not stored:
            return []
        if not keys:
            return [
                checks.Error(
                    f"{stored} stored credential(s) and CONDUIT_CREDENTIAL_KEYS is not set",
                    id=KEYS_MISSING,
                    hint="Set CONDUIT_CREDENTIAL_KEYS to the key(s) that sealed them "
                    "(docs/configuration.md#credentials).",
                )
            ]
        unreadable = credentials_unreadable()
    except DatabaseError:  # no database yet, or before the credential table's migration
        return []
    if unreadable:
        # A warning, not a refusal: webhooks of every source keep being taken in; that source's
        # sends fail before send (credential_undecryptable, retried) until its token is readable.
        return [
            checks.Warning(
                f"stored credential(s) of {', '.join(unreadable)} decrypt under no key in "
                "CONDUIT_CREDENTIAL_KEYS",
                id=UNDECRYPTABLE,
                hint="Put back the key that sealed them (after the new one), or store their tokens again "
                "(manage.py credentials_store).",
            )
        ]
    return []


CONNECT_SIMULATOR_REFUSED = "ingress.E003"


def connect_simulator_loopback(app_configs=None, **kwargs) -> list:
    """The login flows send app secrets and codes where CONDUIT_CONNECT_SIMULATOR_URL points:
    only a simulator on this host may stand in for the platforms' hosts."""
    from django.conf import settings

    from conduit.loopback import loopback_address

    url = settings.CONDUIT_CONNECT_SIMULATOR_URL
    if url and loopback_address(url) is None:
        return [
            checks.Error(
                f"CONDUIT_CONNECT_SIMULATOR_URL {url!r} is not http:// on this host",
                id=CONNECT_SIMULATOR_REFUSED,
                hint="Unset it to connect accounts through the platforms themselves; give "
                "http://127.0.0.1:PORT for the Graph simulator.",
            )
        ]
    return []
