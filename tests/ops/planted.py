"""Test-only planted faults for the error-report tests: a view and a django-q2 task that fail."""

import json
import logging
import os

from django.urls import path

from conduit.urls import urlpatterns as conduit_urlpatterns

# Buyer-like text as it would travel: inside a message body.
BUYER_BODY = json.dumps({"events": [{"text": "hi, send me the CHECKLIST, I am buyer-words-7731"}]})


logging.getLogger("conduit.planted.unhandled").propagate = False


class PlantedError(RuntimeError):
    """The error the tests look for in the report."""


def _fail() -> None:
    secret = os.environ["CONDUIT_PLANTED_SECRET"]
    # Becomes a Sentry breadcrumb after the console handler's BoundaryFilter rewrote it.
    logging.getLogger("conduit.planted").warning("calling the provider with %s", secret)
    # Reaches no handler (so no BoundaryFilter): only the breadcrumb scrubber stands in the way.
    logging.getLogger("conduit.planted.unhandled").warning("calling the provider with %s", secret)
    try:
        raise ValueError(f"could not read body {BUYER_BODY}")
    except ValueError as exc:
        raise PlantedError(f"provider refused credential {secret}") from exc


def planted_view(request):
    _fail()


def failing_task() -> None:
    _fail()


urlpatterns = [*conduit_urlpatterns, path("planted-error/", planted_view)]
