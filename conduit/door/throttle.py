"""Throttled sign-in: django-axes's backend, for sign-ins that come with a request."""

from __future__ import annotations

from typing import Any

from axes.backends import AxesStandaloneBackend
from django.http import HttpRequest


class SignInThrottle(AxesStandaloneBackend):
    """django-axes on the sign-in form: refuses a locked-out user before any password is checked.

    A call with no request (a script's or the test client's `authenticate()`) is not a sign-in
    over HTTP and cannot be driven by a guesser: it is left to the next backend, where axes
    itself would refuse it outright.
    """

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> None:
        if request is None:
            return None
        return super().authenticate(request, username, password, **kwargs)
