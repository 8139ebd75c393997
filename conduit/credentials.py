"""Credentials at rest: encrypted with the keys CONDUIT_CREDENTIAL_KEYS lists.

cryptography's MultiFernet, used directly: the first key encrypts, every key decrypts, and
`rotated` re-encrypts a value under the first. The keys are the deployment's own, never derived
from SECRET_KEY, so changing one never touches the other. A value no key decrypts raises
CredentialUndecryptable: never a plaintext fallback, never an empty token in its place.

Pure (Django settings only): the credential table and its writers live in ingress.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet


class CredentialKeysMissing(Exception):
    """Credentials are to be written or read and CONDUIT_CREDENTIAL_KEYS names no key."""


class CredentialKeyInvalid(Exception):
    """A key in CONDUIT_CREDENTIAL_KEYS is not a Fernet key (named by its position, never shown)."""


class CredentialUndecryptable(Exception):
    """A stored credential that none of the configured keys decrypts."""


def key_refusal(keys: list[str] | tuple[str, ...]) -> str:
    """Why the configured keys cannot be used, or "" (no key at all is not a refusal here)."""
    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except (ValueError, TypeError):
            return (
                f"CONDUIT_CREDENTIAL_KEYS key {position} of {len(keys)} is not a Fernet key "
                "(32 url-safe base64-encoded bytes; make one with "
                "`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`)"
            )
    return ""


def _keys() -> list[Fernet]:
    from django.conf import settings

    keys = list(settings.CONDUIT_CREDENTIAL_KEYS)
    if not keys:
        raise CredentialKeysMissing(
            "CONDUIT_CREDENTIAL_KEYS is not set: stored credentials cannot be encrypted or read"
        )
    refusal = key_refusal(keys)
    if refusal:
        raise CredentialKeyInvalid(refusal)
    return [Fernet(key) for key in keys]


def _configured() -> MultiFernet:
    return MultiFernet(_keys())


def sealed(value: str) -> str:
    """`value` encrypted under the first configured key (a Fernet token, ASCII)."""
    return _configured().encrypt(value.encode()).decode("ascii")


def opened(stored: str) -> str:
    """The value `stored` holds, decrypted by whichever configured key sealed it."""
    try:
        return _configured().decrypt(stored.encode("ascii")).decode()
    except (InvalidToken, UnicodeError):
        raise CredentialUndecryptable(
            "a stored credential decrypts under no key in CONDUIT_CREDENTIAL_KEYS "
            "(was the key that sealed it removed?)"
        ) from None


def rotated(stored: str) -> str:
    """`stored` re-encrypted under the first configured key (its value unchanged)."""
    try:
        return _configured().rotate(stored.encode("ascii")).decode("ascii")
    except (InvalidToken, UnicodeError):
        raise CredentialUndecryptable(
            "a stored credential decrypts under no key in CONDUIT_CREDENTIAL_KEYS"
        ) from None


def sealed_by_first(stored: str) -> bool:
    """Whether the first configured key alone decrypts `stored` (rotation has reached it)."""
    try:
        _keys()[0].decrypt(stored.encode("ascii"))
    except InvalidToken:
        return False
    return True
