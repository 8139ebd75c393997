"""A platform app's user callbacks: a person removed the app (deauthorize), a person asks for
their data's deletion, and the deletion's status page the confirmation code opens.

Each request is the platform's signed word (`SharedCallback.user_request`); a refused one
(unknown app, malformed, wrong algorithm, bad signature) changes nothing and leaves one log line
of codes: its size and digest, never the value, the secret or the payload.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import parse_qs

from django.db import DatabaseError, IntegrityError
from django.http import HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conduit.api import JSONOnly, error
from conduit.canonical import sha256_hex
from conduit.providers.base import ProofError, SecretUnavailable, SharedCallback
from conduit.providers.registry import shared_callback
from ingress.services.disconnect import (
    UnknownApp,
    account_deauthorize,
    deletion_request_receive,
    deletion_request_status,
)
from ingress.views import _body_or_refusal, _unavailable

logger = logging.getLogger("conduit.ingress")

# A form of one field holding a few hundred characters; anything near this is not the platform's.
MAX_BODY_BYTES = 8 * 1024
CONFIRMATION_CODE = re.compile(r"[A-Za-z0-9_-]{16,32}")
# Refusals by code: (HTTP status, what to tell the caller).
REFUSALS = {
    "malformed_signed_request": (
        status.HTTP_400_BAD_REQUEST,
        "the body must be a form with one signed_request",
    ),
    "unsupported_algorithm": (
        status.HTTP_400_BAD_REQUEST,
        "the signed request's algorithm must be HMAC-SHA256",
    ),
    "missing_user_id": (status.HTTP_400_BAD_REQUEST, "the signed request names no user_id"),
    "invalid_signature": (status.HTTP_401_UNAUTHORIZED, "the signature is not this app's"),
}


def _signed_value(body: bytes) -> str:
    """The form's `signed_request`; ProofError when the body is not a form holding exactly one."""
    try:
        form = parse_qs(body.decode("ascii"), keep_blank_values=True, max_num_fields=8)
    except (UnicodeDecodeError, ValueError):
        raise ProofError("malformed_signed_request", "the body is not a form") from None
    values = form.get("signed_request", [])
    if len(values) != 1 or not values[0]:
        raise ProofError("malformed_signed_request", "the form holds no single signed_request")
    return values[0]


class UserCallbackView(APIView):
    """POST /webhooks/<platform>/<app id>/deauthorize/ and /deletion/: the platform's signed
    requests about one of the app's users. Wired per platform and kind in the URLconf."""

    authentication_classes: list = []
    permission_classes: list = []
    parser_classes: list = []
    content_negotiation_class = JSONOnly
    http_method_names = ["post"]
    platform: str = ""
    kind: str = ""  # "deauthorize" or "deletion"

    def post(self, request: Request, app_id: str) -> Response:
        callback = shared_callback(self.platform)
        body = _body_or_refusal(request._request, MAX_BODY_BYTES)
        if isinstance(body, Response):
            return body
        try:
            if not callback.app_id.fullmatch(app_id):
                raise UnknownApp(app_id)
            value = _signed_value(body)
            if self.kind == "deletion":
                deletion, _ = deletion_request_receive(callback=callback, app_id=app_id, value=value)
                url = request._request.build_absolute_uri(
                    reverse(
                        f"webhook-{self.platform}-deletion-status",
                        kwargs={"app_id": app_id, "code": deletion.confirmation_code},
                    )
                )
                return Response({"url": url, "confirmation_code": deletion.confirmation_code})
            done = account_deauthorize(callback=callback, app_id=app_id, value=value)
            return Response({"disconnected": len(done.sources)})
        except UnknownApp:
            self._receipt(callback, app_id, "unknown_app", body)
            return error(
                status.HTTP_404_NOT_FOUND,
                "unknown_app",
                f"no {callback.label} source is registered for that app",
            )
        except ProofError as refused:
            self._receipt(callback, app_id, refused.code, body)
            code, detail = REFUSALS.get(refused.code, (status.HTTP_400_BAD_REQUEST, refused.detail))
            return error(code, refused.code, detail)
        except SecretUnavailable:
            self._receipt(callback, app_id, "source_secret_unavailable", body)
            return _unavailable(
                "source_secret_unavailable", "this app cannot verify requests yet; retry later"
            )
        except IntegrityError:
            raise  # a broken invariant is a bug, not an outage
        except DatabaseError as exc:
            logger.warning("%s %s store unavailable error=%s", self.platform, self.kind, type(exc).__name__)
            return _unavailable(
                "store_unavailable", "the store is unavailable; nothing was changed, retry later"
            )

    def _receipt(self, callback: SharedCallback, app_id: str, code: str, body: bytes) -> None:
        """The refusal's log line: codes, the body's size and digest; never its text."""
        logger.warning(
            "%s %s refused app=%s code=%s bytes=%s body_sha256=%s",
            callback.platform,
            self.kind,
            app_id if callback.app_id.fullmatch(app_id) else "(not an app id)",
            code,
            len(body),
            sha256_hex(body)[:16],
        )


class DeletionStatusView(APIView):
    """GET /webhooks/<platform>/<app id>/deletion/<code>/: the person's readable status of their
    deletion request: what was done, in counts; never what was deleted."""

    authentication_classes: list = []
    permission_classes: list = []
    content_negotiation_class = JSONOnly
    http_method_names = ["get"]
    platform: str = ""

    def get(self, request: Request, app_id: str, code: str):
        callback = shared_callback(self.platform)
        found = None
        if callback.app_id.fullmatch(app_id) and CONFIRMATION_CODE.fullmatch(code):
            found = deletion_request_status(app_id=app_id, confirmation_code=code)
        if found is None:
            return error(
                status.HTTP_404_NOT_FOUND, "unknown_confirmation_code", "no deletion request has that code"
            )
        page = format_html(
            "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Data deletion request {}</title>"
            "</head><body><h1>Data deletion request {}</h1>"
            "<p>Status: <strong>completed</strong> on {} (received {}).</p>"
            "<p>The text of {} retained message(s) you sent was deleted, and {} connected account(s) "
            "were disconnected, their access tokens deleted.</p>"
            "<p>What stays holds no message content: identifiers, one-way digests and states, kept so "
            "that the same message is never answered twice.</p></body></html>",
            found.confirmation_code,
            found.confirmation_code,
            f"{found.completed_at:%Y-%m-%d %H:%M UTC}",
            f"{found.received_at:%Y-%m-%d %H:%M UTC}",
            found.events_blanked,
            found.sources_disconnected,
        )
        response = HttpResponse(page, content_type="text/html; charset=utf-8")
        response["X-Content-Type-Options"] = "nosniff"
        response["Cache-Control"] = "no-store"
        return response
