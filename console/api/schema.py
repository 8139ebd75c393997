"""GET /api/schema/: the OpenAPI description of everything under /api/, composed from each API's parts."""

from __future__ import annotations

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.api.events import OPENAPI_PATHS as EVENT_API_PATHS
from console.api.events import OPENAPI_SCHEMAS as EVENT_API_SCHEMAS
from console.api.quarantine import OPENAPI_PATHS as QUARANTINE_API_PATHS
from console.api.quarantine import OPENAPI_SCHEMAS as QUARANTINE_API_SCHEMAS
from reconcile.api import OPENAPI_PATHS as DECISION_API_PATHS
from reconcile.api import OPENAPI_SCHEMAS as DECISION_API_SCHEMAS

# Every API error: a stable `code`, and a `detail` or (a refused query) `errors` by parameter.
ERROR_SCHEMA = {
    "type": "object",
    "required": ["code"],
    "anyOf": [{"required": ["detail"]}, {"required": ["errors"]}],
    "properties": {
        "code": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"},
        "detail": {"type": "string"},
        "errors": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
        "violations": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "pointer": {"type": "string"},
                    "message": {"type": "string"},
                    "keyword": {"type": "string"},
                },
            },
        },
    },
}

OPENAPI = {
    "openapi": "3.1.0",
    "info": {"title": "Conduit API: the replay-decision API and the read API", "version": "1"},
    "components": {
        "securitySchemes": {
            "token": {
                "type": "apiKey",
                "in": "header",
                "name": "Authorization",
                "description": "Token <key> (DRF authtoken)",
            },
            "session": {
                "type": "apiKey",
                "in": "cookie",
                "name": "sessionid",
                "description": "a staff member's admin session (with CSRF)",
            },
        },
        "schemas": {
            **DECISION_API_SCHEMAS,
            "Error": ERROR_SCHEMA,
            **EVENT_API_SCHEMAS,
            **QUARANTINE_API_SCHEMAS,
        },
    },
    "security": [{"token": []}, {"session": []}],
    "paths": {
        **DECISION_API_PATHS,
        **EVENT_API_PATHS,
        **QUARANTINE_API_PATHS,
    },
}


class OpenAPIView(APIView):
    """The OpenAPI description of the decision API and the read API (public: it holds no data)."""

    authentication_classes: list = []
    permission_classes: list = []

    def get(self, request: Request) -> Response:
        return Response(OPENAPI)
