"""The read API's quarantine list, and what every read list shares: pagination, query checks, OpenAPI parts.

The event list shows each event's reply actions, so it is replies' (replies/api.py).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import exceptions, generics, serializers, status
from rest_framework.pagination import Cursor, CursorPagination

from conduit.api import QueryText
from conduit.routers import read_alias
from ingress.models import QuarantineReceipt, QuarantineState
from ingress.selectors import quarantine_list

MAX_PAGE_SIZE = 500
# A cursor is DRF's base64 of a short query string; anything longer is not one of ours.
MAX_CURSOR_LENGTH = 200
MAX_ID = 2**63 - 1  # bigint: the position is an id


class InvalidCursor(exceptions.APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "the cursor is not one this API issued"
    default_code = "invalid_cursor"


class NewestFirst(CursorPagination):
    ordering = "-id"
    page_size = 50
    max_page_size = MAX_PAGE_SIZE
    page_size_query_param = "page_size"

    def decode_cursor(self, request) -> Cursor | None:
        # DRF answers a malformed cursor with a 404 and passes its position to
        # the query unchecked (a non-number was a 500): both are a 400 here.
        try:
            cursor = super().decode_cursor(request)
        except exceptions.NotFound:
            raise InvalidCursor() from None
        if cursor is not None and cursor.position is not None:
            position = cursor.position
            if not (position.isascii() and position.isdigit() and int(position) <= MAX_ID):
                raise InvalidCursor()
        return cursor


class ListQuery(serializers.Serializer):
    """The query parameters every list takes: printable and bounded, or a 400 naming each one."""

    cursor = QueryText(max_length=MAX_CURSOR_LENGTH)
    page_size = serializers.IntegerField(min_value=1, max_value=10**9, required=False)


def validated_query(serializer_class: type[serializers.Serializer], request) -> dict[str, Any]:
    query = serializer_class(data=request.query_params.dict())
    query.is_valid(raise_exception=True)
    return query.validated_data


class QuarantineList(generics.ListAPIView):
    """GET /api/quarantine/?source=&state=: quarantine receipts, newest first."""

    pagination_class = NewestFirst
    # What the admin's quarantine ledger asks (conduit.api.AdminRules).
    required_permissions = ("ingress.view_quarantinereceipt",)

    class Query(ListQuery):
        source = QueryText(max_length=64)
        state = serializers.ChoiceField(choices=QuarantineState.values, required=False)

    class OutputSerializer(serializers.ModelSerializer):
        source = serializers.SlugRelatedField(slug_field="name", read_only=True)

        class Meta:
            model = QuarantineReceipt
            fields = ["receipt_id", "reason_code", "received_at", "source", "state", "authenticated"]

    serializer_class = OutputSerializer

    def get_queryset(self) -> QuerySet:
        query = validated_query(self.Query, self.request)
        # A read with no write after it: the replica when one is set (conduit/routers.py).
        return quarantine_list(source=query.get("source", ""), state=query.get("state", "")).using(
            read_alias(self.request))


# The OpenAPI description of the quarantine list, merged into /api/schema/ (reconcile/api.py).
# The pattern says what refuse_control_characters refuses, so that generated
# "valid" values are valid and generated invalid ones must be refused.
_PRINTABLE = "^[^\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029]*$"


def text_parameter(name: str, max_length: int, description: str) -> dict[str, Any]:
    return {
        "name": name, "in": "query", "required": False, "description": description,
        "schema": {"type": "string", "maxLength": max_length, "pattern": _PRINTABLE},
    }


def list_parameters() -> list[dict[str, Any]]:
    return [
        text_parameter("cursor", MAX_CURSOR_LENGTH, "the opaque cursor of a `next` or `previous` link"),
        {"name": "page_size", "in": "query", "required": False,
         "description": f"results per page, at most {MAX_PAGE_SIZE} (a larger number is read as {MAX_PAGE_SIZE})",
         "schema": {"type": "integer", "minimum": 1, "maximum": 10**9}},
    ]


def date_time_schema() -> dict[str, Any]:
    return {"type": "string", "format": "date-time"}


def page_schema(item_ref: str) -> dict[str, Any]:
    link = {"type": ["string", "null"], "format": "uri"}
    return {
        "type": "object", "required": ["next", "previous", "results"], "additionalProperties": False,
        "properties": {"next": link, "previous": link,
                       "results": {"type": "array", "items": {"$ref": item_ref}}},
    }


def list_operation(summary: str, page_ref: str, parameters: list[dict[str, Any]]) -> dict[str, Any]:
    def refusal(description: str) -> dict[str, Any]:
        return {"description": description, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Error"}}}}

    return {
        "summary": summary,
        "parameters": parameters + list_parameters(),
        "responses": {
            "200": {"description": "One page, newest first", "content": {"application/json": {
                "schema": {"$ref": page_ref}}}},
            "400": refusal("`invalid` with `errors` naming each refused parameter, or `invalid_cursor`"),
            "401": refusal("`not_authenticated`: no token or session"),
            "403": refusal("`not_staff` (a session of a user who is not staff), `second_factor_required` "
                           "(a session not verified while CONDUIT_ADMIN_2FA=required) or `permission_denied` "
                           "(the user lacks the ledger's view permission)"),
            "404": refusal("`not_found`: an unknown `format`"),
            "406": refusal("`not_acceptable`: only application/json is served"),
        },
    }


OPENAPI_SCHEMAS: dict[str, Any] = {
    "QuarantineReceipt": {
        "type": "object", "additionalProperties": False,
        "required": ["receipt_id", "reason_code", "received_at", "source", "state", "authenticated"],
        "properties": {
            "receipt_id": {"type": "string", "format": "uuid"}, "reason_code": {"type": "string"},
            "received_at": date_time_schema(), "source": {"type": "string"},
            "state": {"enum": list(QuarantineState.values)}, "authenticated": {"type": "boolean"},
        },
    },
    "QuarantinePage": page_schema("#/components/schemas/QuarantineReceipt"),
}

OPENAPI_PATHS: dict[str, Any] = {
    "/api/quarantine/": {"get": list_operation(
        "Quarantine receipts", "#/components/schemas/QuarantinePage",
        [
            text_parameter("source", 64, "receipts of the source with this name"),
            {"name": "state", "in": "query", "required": False, "description": "receipts in this state",
             "schema": {"enum": list(QuarantineState.values)}},
        ],
    )},
}
