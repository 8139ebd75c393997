"""POST /api/decisions/ (the replay-decision API) and its OpenAPI parts, merged into /api/schema/
(console/api/schema.py)."""

from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conduit.api import error
from reconcile.decisions.engine import VERDICTS
from reconcile.decisions.schema import REQUEST_SCHEMA
from reconcile.decisions.service import InvalidRequest, decision_make


class DecisionView(APIView):
    """A decision reads no ledger (the request carries its evidence): any session or token the
    API's door admits (conduit.api.AdminRules), no model permission."""

    authentication_classes = [TokenAuthentication, SessionAuthentication]
    required_permissions: tuple[str, ...] = ()

    def post(self, request: Request) -> Response:
        try:
            decision = decision_make(request=request.data)
        except InvalidRequest as exc:
            return error(
                status.HTTP_400_BAD_REQUEST,
                "invalid_request",
                f"the request does not match the replay-decision schema ({len(exc.violations)} violations)",
                violations=exc.violations,
            )
        return Response(decision)


_QUESTION = {
    "type": "object",
    "required": ["ask", "question", "status", "evidence"],
    "properties": {
        "ask": {"type": "string", "examples": ["attempts/0"]},
        "question": {"const": "destination_outcome@1"},
        "status": {"enum": ["model_unavailable", "abstained", "answered"]},
        "answer": {"enum": ["applied", "not_applied", "not_established"]},
        "rule": {"type": "string"},
        "evidence": {"type": "array", "items": {"type": "string", "examples": ["/attempts/0/evidence"]}},
    },
}
DECISION_SCHEMA = {
    "type": "object",
    "required": ["verdict", "next", "questions"],
    "properties": {
        "verdict": {"enum": list(VERDICTS)},
        "next": {
            "type": "object",
            "required": ["action", "text", "role"],
            "properties": {
                "action": {"type": "string"},
                "text": {"type": "string"},
                "role": {"type": "string"},
            },
        },
        "questions": {"type": "array", "items": _QUESTION},
    },
}


def _refusal(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


OPENAPI_SCHEMAS: dict[str, Any] = {"DecisionRequest": REQUEST_SCHEMA, "Decision": DECISION_SCHEMA}

OPENAPI_PATHS: dict[str, Any] = {
    "/api/decisions/": {
        "post": {
            "summary": "May this be applied or delivered again?",
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/DecisionRequest"}}},
            },
            "responses": {
                "200": {
                    "description": "The decision",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Decision"}}},
                },
                "400": _refusal(
                    "`invalid_request` with every schema violation, each with its JSON pointer; "
                    "`parse_error` (not JSON, not UTF-8, a number beyond a double), `nesting_too_deep` "
                    "(deeper than 32 levels) or `invalid_unicode` (a lone surrogate)"
                ),
                "401": _refusal("`not_authenticated`: no token or session"),
                "403": _refusal(
                    "`not_staff`: a session of a user who is not staff; "
                    "`second_factor_required`: a session not verified while "
                    "CONDUIT_ADMIN_2FA=required; `permission_denied`: without CSRF"
                ),
                "406": _refusal("`not_acceptable`: only application/json is served"),
                "413": _refusal("`payload_too_large`: a body over DATA_UPLOAD_MAX_MEMORY_SIZE (2.5 MB)"),
                "415": _refusal("`unsupported_media_type`: only application/json is read"),
            },
        }
    },
}
