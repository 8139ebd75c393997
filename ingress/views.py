"""The webhook endpoints: POST /webhooks/<source>/ and a platform app's shared callback, the only
unauthenticated writes."""

import logging
import re

from django.conf import settings
from django.db import DatabaseError, IntegrityError
from django.http import HttpResponse
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conduit.api import JSONOnly, error, json_answer
from conduit.metrics import SOURCE_ATTRIBUTE
from conduit.providers.base import SecretUnavailable, SharedCallback
from conduit.providers.registry import shared_callback
from ingress.selectors import source_by_name
from ingress.services import ProofRefused, webhook_receive
from ingress.services.shared_callback import callback_sources, shared_callback_receive, verification_answer
from ingress.writes import SourceChanged

logger = logging.getLogger("conduit.ingress")

PROOF_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")
# A source name is a slug (the Source.name field): anything else names no source,
# and is answered without touching the database or reaching a log line.
SOURCE_NAME = re.compile(r"[-a-zA-Z0-9_]{1,64}")
READ_CHUNK = 64 * 1024


class BodyTooLarge(Exception):
    pass


class LengthRequired(Exception):
    pass


def _unavailable(code: str, detail: str) -> Response:
    response = error(status.HTTP_503_SERVICE_UNAVAILABLE, code, detail)
    response["Retry-After"] = str(settings.CONDUIT_RETRY_AFTER_SECONDS)
    return response


def _proof_headers(django_request, names: tuple[str, ...]) -> dict[str, str]:
    """The proof's headers as their sender wrote them ("" when absent), read from the WSGI
    environ by their CGI names: request.headers would build a map of every header first."""
    environ = django_request.META
    return {name: _header_text(environ.get(f"HTTP_{name.upper().replace('-', '_')}", "")) for name in names}


def _header_text(value: str) -> str:
    """A header as its sender wrote it: WSGI hands header bytes over decoded as Latin-1
    (PEP 3333), while a sender signs its UTF-8 text (a delivery id may hold non-ASCII)."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def read_body(django_request, limit: int) -> bytes:
    """The raw body as it really arrived, at most `limit` bytes.

    With Content-Length, Django's stream is bounded by it. A chunked body has
    none: it is read from the server's input only when the server says that
    input ends with the body (gunicorn sets wsgi.input_terminated); otherwise
    nothing can tell where the body stops, and the answer is 411.
    """
    environ = django_request.META
    chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
    if not chunked:
        try:
            declared = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            raise LengthRequired from None
        if declared > limit:
            raise BodyTooLarge
        body = django_request.read(limit + 1)
    elif environ.get("wsgi.input_terminated"):
        stream, parts, size = environ["wsgi.input"], [], 0
        while size <= limit:
            part = stream.read(min(READ_CHUNK, limit + 1 - size))
            if not part:
                break
            parts.append(part)
            size += len(part)
        body = b"".join(parts)
    else:
        raise LengthRequired
    if len(body) > limit:
        raise BodyTooLarge
    return body


def _body_or_refusal(django_request, limit: int) -> bytes | Response:
    try:
        return read_body(django_request, limit)
    except BodyTooLarge:
        return error(
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            "payload_too_large",
            f"webhook bodies are limited to {limit} bytes",
        )
    except LengthRequired:
        return error(
            status.HTTP_411_LENGTH_REQUIRED,
            "length_required",
            "send the body with a Content-Length header (this server cannot read a chunked body)",
        )


def _stored(receive, name: str):
    """Run one acceptance; the answers every webhook gives when it could not be stored."""
    try:
        return receive()
    except ProofRefused as refused:
        return error(
            status.HTTP_401_UNAUTHORIZED,
            refused.code,
            refused.detail,
            receipt_id=refused.receipt_id,
            **({"coalesced": True} if refused.coalesced else {}),
        )
    except SecretUnavailable as exc:
        logger.error("source secret unavailable source=%s: %s", name, exc)
        return _unavailable(
            "source_secret_unavailable",
            "this source cannot verify deliveries yet; retry later",
        )
    except IntegrityError:
        raise  # a broken invariant is a bug, not an outage
    except DatabaseError as exc:
        logger.warning("store unavailable source=%s error=%s", name, type(exc).__name__)
        return _unavailable(
            "store_unavailable", "the event store is unavailable; nothing was recorded, retry later"
        )


class WebhookView(APIView):
    """Read the raw body once, verify proof, accept in one transaction, then acknowledge."""

    authentication_classes: list = []
    permission_classes: list = []
    parser_classes: list = []
    content_negotiation_class = JSONOnly
    http_method_names = ["post"]  # OPTIONS too is a 405: nothing about the endpoint is described

    def post(self, request: Request, source_name: str) -> Response:
        if not SOURCE_NAME.fullmatch(source_name):
            return self._unknown_source()
        body = _body_or_refusal(request._request, settings.CONDUIT_WEBHOOK_MAX_BYTES)
        if isinstance(body, Response):
            return body
        headers = _proof_headers(request._request, PROOF_HEADERS)

        def receive():
            for cached in (True, False):
                source = source_by_name(source_name, cached=cached)
                if source is None:
                    return self._unknown_source()
                setattr(request._request, SOURCE_ATTRIBUTE, source.name)  # a registered name: a metrics label
                try:
                    return webhook_receive(source=source, body=body, headers=headers)
                except SourceChanged:  # nothing was written: again, with the source read afresh
                    continue

        result = _stored(receive, source_name)
        if isinstance(result, Response):
            return result
        payload = {
            "delivery_id": result.delivery_id,
            "results": [
                {
                    "index": r.index,
                    "result": r.result,
                    **({"event_key": r.event_key} if r.event_key else {}),
                    **({"receipt_id": r.receipt_id} if r.receipt_id else {}),
                    **({"reason_code": r.reason_code} if r.reason_code else {}),
                }
                for r in result.results
            ],
        }
        if result.quarantined:
            payload["receipt_ids"] = result.receipt_ids
            payload["accepted"] = not result.refused
            return json_answer(payload, status.HTTP_202_ACCEPTED)
        return json_answer(payload, status.HTTP_200_OK)

    @staticmethod
    def _unknown_source() -> Response:
        return error(status.HTTP_404_NOT_FOUND, "unknown_source", "no source is registered under that name")


class SharedCallbackView(APIView):
    """/webhooks/<platform>/<app id>/: a platform app's verification handshake (GET) and its
    notifications (POST), one endpoint for every source of the app.

    Wired per platform in the URLconf: `platform` names the adapters' shared callback, and
    `body_limit_setting` the setting bounding its bodies.
    """

    authentication_classes: list = []
    permission_classes: list = []
    parser_classes: list = []
    content_negotiation_class = JSONOnly
    http_method_names = ["get", "post"]
    platform: str = ""
    body_limit_setting: str = ""

    @property
    def callback(self) -> SharedCallback:
        return shared_callback(self.platform)

    def get(self, request: Request, app_id: str):
        callback = self.callback
        challenge = None
        if callback.app_id.fullmatch(app_id):
            challenge = verification_answer(callback=callback, app_id=app_id, query=request._request.GET)
        if challenge is None:
            return error(
                status.HTTP_403_FORBIDDEN, "verification_failed", "the verify token does not match this app's"
            )
        response = HttpResponse(challenge, content_type="text/plain; charset=utf-8")
        response["X-Content-Type-Options"] = "nosniff"
        return response

    def post(self, request: Request, app_id: str) -> Response:
        callback = self.callback
        if not callback.app_id.fullmatch(app_id):
            return self._unknown_app(callback)
        # The platform's own limit, sized from its documented bounds (conduit/settings.py).
        body = _body_or_refusal(request._request, getattr(settings, self.body_limit_setting))
        if isinstance(body, Response):
            return body
        headers = _proof_headers(request._request, callback.proof_headers)

        def receive():
            sources = callback_sources(callback=callback, app_id=app_id)
            if not sources:
                return self._unknown_app(callback)
            setattr(request._request, SOURCE_ATTRIBUTE, f"{callback.platform}:{app_id}")
            return shared_callback_receive(
                callback=callback, app_id=app_id, sources=sources, body=body, headers=headers
            )

        result = _stored(receive, f"{callback.platform}-app-{app_id}")
        if isinstance(result, Response):
            return result
        # The platform understands only 200: an authentic body is answered 200 whatever was quarantined.
        payload = {"delivery_id": result.delivery_id, "results": result.results}
        if result.receipt_ids:
            payload["receipt_ids"] = result.receipt_ids
        if result.ignored:
            payload["ignored"] = result.ignored
        return json_answer(payload, status.HTTP_200_OK)

    @staticmethod
    def _unknown_app(callback: SharedCallback) -> Response:
        return error(
            status.HTTP_404_NOT_FOUND, "unknown_app", f"no {callback.label} source is registered for that app"
        )
