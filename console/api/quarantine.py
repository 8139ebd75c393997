"""GET /api/quarantine/: the quarantine ledger's receipts, newest first."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import generics, serializers

from conduit.api import (
    ListQuery,
    NewestFirst,
    QueryText,
    date_time_schema,
    list_operation,
    page_schema,
    text_parameter,
    validated_query,
)
from conduit.routers import read_alias
from ingress.models import QuarantineReceipt, QuarantineState
from ingress.selectors import quarantine_list


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
            read_alias(self.request)
        )


# The OpenAPI description of the quarantine list, merged into /api/schema/ (console/api/schema.py).
OPENAPI_SCHEMAS: dict[str, Any] = {
    "QuarantineReceipt": {
        "type": "object",
        "additionalProperties": False,
        "required": ["receipt_id", "reason_code", "received_at", "source", "state", "authenticated"],
        "properties": {
            "receipt_id": {"type": "string", "format": "uuid"},
            "reason_code": {"type": "string"},
            "received_at": date_time_schema(),
            "source": {"type": "string"},
            "state": {"enum": list(QuarantineState.values)},
            "authenticated": {"type": "boolean"},
        },
    },
    "QuarantinePage": page_schema("#/components/schemas/QuarantineReceipt"),
}

OPENAPI_PATHS: dict[str, Any] = {
    "/api/quarantine/": {
        "get": list_operation(
            "Quarantine receipts",
            "#/components/schemas/QuarantinePage",
            [
                text_parameter("source", 64, "receipts of the source with this name"),
                {
                    "name": "state",
                    "in": "query",
                    "required": False,
                    "description": "receipts in this state",
                    "schema": {"enum": list(QuarantineState.values)},
                },
            ],
        )
    },
}
