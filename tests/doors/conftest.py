"""The back office's people, by role, signed in with or without the second factor."""

from __future__ import annotations

import pytest

PASSWORD = "unused-test-password"
# Each role and the group it belongs to (None: no group, or not a user at all).
ROLES = {
    "anonymous": None,
    "staff_no_group": None,
    "reviewer": "reviewers",
    "operator": "operators",
    "owner": "owners",
    "superuser": None,
}


def make_user(role: str):
    """A staff user of `role` (None for anonymous)."""
    from django.contrib.auth.models import Group, User

    if role == "anonymous":
        return None
    if role == "superuser":
        return User.objects.create_superuser(f"{role}_test", "door@example.invalid", PASSWORD)
    user = User.objects.create_user(f"{role}_test", password=PASSWORD, is_staff=True)
    if ROLES[role]:
        user.groups.add(Group.objects.get(name=ROLES[role]))
    return user


def sign_in(client, user, *, verified: bool) -> None:
    """A session for `user`: password only, or also verified by a confirmed TOTP device, as
    django-otp's login records it in the session (the admin's sign-in form does the same)."""
    from django_otp import DEVICE_ID_SESSION_KEY
    from django_otp.plugins.otp_totp.models import TOTPDevice

    # A new session each time: force_login keeps a signed-in session (and its verified device).
    client.logout()
    if user is None:
        return
    client.force_login(user)
    if verified:
        device, _ = TOTPDevice.objects.get_or_create(user=user, name="phone", defaults={"confirmed": True})
        session = client.session
        session[DEVICE_ID_SESSION_KEY] = device.persistent_id
        session.save()


@pytest.fixture
def signed_in(client, db):
    """signed_in(role, verified=...) -> the client, signed in as a fresh user of that role."""

    def _signed_in(role: str, *, verified: bool = False):
        sign_in(client, make_user(role), verified=verified)
        return client

    return _signed_in
