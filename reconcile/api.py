"""POST /api/decisions/ (the replay-decision API) and GET /api/schema/ (its OpenAPI description)."""

from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from conduit.api import error
from reconcile.decisions.engine import VERDICTS
from reconcile.decisions.schema import REQUEST_SCHEMA
from reconcile.decisions.service import InvalidRequest, decision_make


class TokenOrStaff(BasePermission):
    """A token user, or a staff member's session."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return bool(request.user and request.user.is_authenticated and (request.auth or request.user.is_staff))


class DecisionView(APIView):
    authentication_classes = [TokenAuthentication, SessionAuthentication]
    permission_classes = [TokenOrStaff]

    def post(self, request: Request) -> Response:
        try:
            decision = decision_make(request=request.data)
        except InvalidRequest as exc:
            return error(
                status.HTTP_400_BAD_REQUEST, "invalid_request",
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
            "properties": {"action": {"type": "string"}, "text": {"type": "string"}, "role": {"type": "string"}},
        },
        "questions": {"type": "array", "items": _QUESTION},
    },
}
ERROR_SCHEMA = {
    "type": "object",
    "required": ["code", "detail"],
    "properties": {
        "code": {"type": "string"},
        "detail": {"type": "string"},
        "violations": {
            "type": "array",
            "items": {"type": "object", "properties": {
                "pointer": {"type": "string"}, "message": {"type": "string"}, "keyword": {"type": "string"},
            }},
        },
    },
}
OPENAPI = {
    "openapi": "3.1.0",
    "info": {"title": "Conduit replay-decision API", "version": "1"},
    "components": {
        "securitySchemes": {
            "token": {"type": "apiKey", "in": "header", "name": "Authorization",
                      "description": "Token <key> (DRF authtoken)"},
            "session": {"type": "apiKey", "in": "cookie", "name": "sessionid",
                        "description": "a staff member's admin session (with CSRF)"},
        },
        "schemas": {"DecisionRequest": REQUEST_SCHEMA, "Decision": DECISION_SCHEMA, "Error": ERROR_SCHEMA},
    },
    "security": [{"token": []}, {"session": []}],
    "paths": {
        "/api/decisions/": {
            "post": {
                "summary": "May this be applied or delivered again?",
                "requestBody": {"required": True, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/DecisionRequest"}}}},
                "responses": {
                    "200": {"description": "The decision", "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/Decision"}}}},
                    "400": {"description": "Every schema violation, each with its JSON pointer", "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
                    "401": {"description": "No token or session"},
                    "403": {"description": "A session that is not staff"},
                },
            }
        }
    },
}


class OpenAPIView(APIView):
    """The OpenAPI description of the decision API (public: it holds no data)."""

    authentication_classes: list = []
    permission_classes: list = []

    def get(self, request: Request) -> Response:
        return Response(OPENAPI)
