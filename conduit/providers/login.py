"""Connecting an account through a platform's login flow: what every login declares and returns.

A login is data on the platform's side (which adapter its assets become sources of, the settings
and variables its app is configured by) and two protocol steps: the URL a person is sent to, and
the server-side exchange of the code the platform sends back for the assets the grant reaches.
Ingress runs the flow (state, session, sources, credentials); it never names a platform.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class LoginApp:
    """The platform app a login runs under, as this deployment configured it.

    `simulator_url`: a loopback base URL standing in for every host of the platform (the demo and
    the tests); "" for the platform itself."""

    client_id: str
    client_secret: str = field(repr=False)
    redirect_uri: str
    config_id: str = ""
    graph_version: str = "v26.0"
    simulator_url: str = ""


@dataclass(frozen=True)
class GrantedAsset:
    """One account the grant reaches, with the token a source acts as it with."""

    account_ref: str
    name: str  # how the platform names it (a username, a Page's name); shown to the owner
    access_token: str = field(repr=False)
    expires_at: datetime | None = None  # None: no clock expiry (a Page token)
    scopes: tuple[str, ...] = ()
    source_url: str = ""  # the Graph URL the source reads and sends through


class LoginRefused(Exception):
    """The platform refused a step of the grant (or answered nothing usable). The message is in
    Conduit's words with the platform's code, never the platform's text, the code or a token."""


class AccountLogin:
    """A platform's login flow. Subclasses fill the names and the two steps."""

    name: str = ""  # the URL segment: /admin/ingress/source/connect/<name>/
    label: str = ""  # the button reads "Connect <label>"
    adapter: str = ""  # the adapter the granted assets become sources of
    # Settings (conduit/settings.py) that configure the app: its client id, the app its webhooks
    # arrive for, and (Facebook Login for Business) the login configuration.
    client_id_setting: str = ""
    callback_app_setting: str = ""
    config_id_setting: str = ""
    # Environment variables (declared for credentials) the sources made by the login name.
    secret_variable: str = ""  # the app secret: the code exchange and the webhook signatures
    verify_token_variable: str = ""
    event_types: tuple[str, ...] = ()  # what a connected source is allowlisted for
    purposes: tuple[str, ...] = ()  # the reply purposes it declares (copy comes from a person)

    def authorize_url(self, app: LoginApp, state: str) -> str:
        raise NotImplementedError

    def grant(self, app: LoginApp, code: str, *, now: datetime, timeout: float) -> list[GrantedAsset]:
        """The assets the code's grant reaches (LoginRefused when a step is refused)."""
        raise NotImplementedError
