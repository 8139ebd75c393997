"""The webhook endpoint: POST /webhooks/<source>/, the only unauthenticated write."""

import logging

from django.conf import settings
from django.db import DatabaseError, IntegrityError
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conduit.api import error
from ingress.selectors import source_by_name
from ingress.services import ProofRefused, webhook_receive
from ingress.sources.base import SecretUnavailable

logger = logging.getLogger("conduit.ingress")

PROOF_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")


def _unavailable(code: str, detail: str) -> Response:
    response = error(status.HTTP_503_SERVICE_UNAVAILABLE, code, detail)
    response["Retry-After"] = str(settings.CONDUIT_RETRY_AFTER_SECONDS)
    return response


class WebhookView(APIView):
    """Read the raw body once, verify proof, accept in one transaction, then acknowledge."""

    authentication_classes: list = []
    permission_classes: list = []
    parser_classes: list = []

    def post(self, request: Request, source_name: str) -> Response:
        limit = settings.CONDUIT_WEBHOOK_MAX_BYTES
        django_request = request._request
        try:
            declared = int(django_request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > limit:
            return self._too_large(limit)
        body = django_request.read(limit + 1)
        if len(body) > limit:
            return self._too_large(limit)
        headers = {name: request.headers.get(name, "") for name in PROOF_HEADERS}

        try:
            source = source_by_name(source_name)
            if source is None:
                return error(
                    status.HTTP_404_NOT_FOUND, "unknown_source",
                    f"no source is registered under {source_name!r}",
                )
            result = webhook_receive(source=source, body=body, headers=headers)
        except ProofRefused as refused:
            return error(
                status.HTTP_401_UNAUTHORIZED, refused.code, refused.detail,
                receipt_id=refused.receipt_id,
            )
        except SecretUnavailable as exc:
            logger.error("source secret unavailable source=%s: %s", source_name, exc)
            return _unavailable(
                "source_secret_unavailable",
                "this source cannot verify deliveries yet; retry later",
            )
        except IntegrityError:
            raise  # a broken invariant is a bug, not an outage
        except DatabaseError as exc:
            logger.warning("store unavailable source=%s error=%s", source_name, type(exc).__name__)
            return _unavailable(
                "store_unavailable", "the event store is unavailable; nothing was recorded, retry later"
            )

        payload = {
            "delivery_id": result.delivery_id,
            "results": [
                {
                    "index": r.index,
                    "result": r.result,
                    **({"event_key": r.event_key} if r.event_key else {}),
                    **({"receipt_id": r.receipt_id, "reason_code": r.reason_code} if r.receipt_id else {}),
                }
                for r in result.results
            ],
        }
        if result.quarantined:
            payload["receipt_ids"] = result.receipt_ids
            return Response(payload, status=status.HTTP_202_ACCEPTED)
        return Response(payload, status=status.HTTP_200_OK)

    @staticmethod
    def _too_large(limit: int) -> Response:
        return error(
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, "payload_too_large",
            f"webhook bodies are limited to {limit} bytes",
        )
