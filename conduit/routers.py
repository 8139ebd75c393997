"""Which database a query uses: the primary, except reads a page chose to send to the replica.

Most reads in Conduit are part of a write (the claim, a lease, a transition reads then writes), so
nothing goes to the replica by default. Two doors choose it: the read API's querysets
(`.using(read_alias(request))`) and, through `ReplicaReadsMiddleware`, the admin's list pages and
report exports, for the apps' own models only (sessions, users, permissions and sign-in records
stay on the primary). After any unsafe request a short-lived cookie pins that browser to the
primary, so the page after an admin action reads its own write.
"""

from __future__ import annotations

import os
from contextvars import ContextVar

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.urls import Resolver404, resolve

REPLICA = "replica"
# The apps whose tables a list page may read from the replica.
REPLICA_APPS = frozenset({"ingress", "replies", "reconcile"})
PIN_COOKIE = "conduit_read_primary"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

# On while a list page renders: the router sends the apps' reads to the replica.
_replica_reads: ContextVar[bool] = ContextVar("conduit_replica_reads", default=False)


def replica_configured() -> bool:
    return REPLICA in connections.settings


def read_alias(request) -> str:
    """The alias a read-only view reads from: the replica if one is set and this browser is not pinned."""
    if replica_configured() and request.method in SAFE_METHODS and PIN_COOKIE not in request.COOKIES:
        return REPLICA
    return DEFAULT_DB_ALIAS


class PrimaryReplicaRouter:
    """Writes to the primary always; reads to the replica only inside a list page that chose it."""

    def db_for_read(self, model, **hints):
        if _replica_reads.get() and model._meta.app_label in REPLICA_APPS:
            return REPLICA
        # None: Django reads where a related instance came from, else the primary.
        return None

    def db_for_write(self, model, **hints):
        return DEFAULT_DB_ALIAS

    def allow_relation(self, obj1, obj2, **hints):
        # The replica is a copy of the primary: a row from either relates to a row from the other.
        return True

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        # The replica replays the primary's schema; it is never migrated itself.
        return db == DEFAULT_DB_ALIAS


def _replica_page(request) -> bool:
    """A GET of an admin list page or report export, by URL name (no admin class needs a hook)."""
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return False
    name = match.url_name or ""
    return match.namespace == "admin" and name.endswith(("_changelist", "_export"))


class ReplicaReadsMiddleware:
    """Admin list pages read the replica; any unsafe request pins its browser to the primary.

    The pin lasts CONDUIT_REPLICA_PIN_SECONDS (longer than the replica's usual lag), so the
    redirect after an admin action, and the pages right after it, show that action's result.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        use_replica = read_alias(request) == REPLICA and _replica_page(request)
        token = _replica_reads.set(use_replica)
        try:
            response = self.get_response(request)
        finally:
            _replica_reads.reset(token)
        # A signed-in person's unsafe request only: a provider's webhook needs no pin.
        user = getattr(request, "user", None)
        if (
            replica_configured()
            and request.method not in SAFE_METHODS
            and user is not None
            and user.is_authenticated
        ):
            response.set_cookie(
                PIN_COOKIE,
                "1",
                max_age=settings.CONDUIT_REPLICA_PIN_SECONDS,
                httponly=True,
                samesite="Lax",
                secure=settings.SESSION_COOKIE_SECURE,
            )
        return response


def close_pools_before_fork() -> None:
    """Close this process's connection pools before it forks (django-q2 forks its workers).

    A forked child would inherit the pool's open connections and share their sockets with the
    parent. Closed here, each process opens its own pool on its next query.
    """
    from django.db.backends.postgresql.base import DatabaseWrapper

    # Pools are per process (a class attribute), whichever thread opened them.
    for alias, pool in list(DatabaseWrapper._connection_pools.items()):
        pool.close()
        DatabaseWrapper._connection_pools.pop(alias, None)


def register_pool_fork_guard() -> None:
    os.register_at_fork(before=close_pools_before_fork)
