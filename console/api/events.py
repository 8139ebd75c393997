"""GET /api/events/: canonical events with their reply actions (a read across both ledgers)."""

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
from ingress.models import EventState, InboundEvent, ReconcileStatus
from replies.models import ApprovalState, DeliveryState, ReplyAction
from replies.selectors import event_list


class EventList(generics.ListAPIView):
    """GET /api/events/?event_key=&source=&state=: canonical records with their reply actions."""

    pagination_class = NewestFirst
    # What the admin's event ledger asks (conduit.api.AdminRules).
    required_permissions = ("ingress.view_inboundevent",)

    class Query(ListQuery):
        event_key = QueryText(max_length=InboundEvent._meta.get_field("event_key").max_length)
        source = QueryText(max_length=64)
        state = serializers.ChoiceField(choices=EventState.values, required=False)

    class OutputSerializer(serializers.ModelSerializer):
        class ReplyActionOutput(serializers.ModelSerializer):
            class Meta:
                model = ReplyAction
                fields = ["reply_key", "purpose", "approval_state", "delivery_state"]

        source = serializers.SlugRelatedField(slug_field="name", read_only=True)
        reply_actions = ReplyActionOutput(many=True, read_only=True)

        class Meta:
            model = InboundEvent
            fields = [
                "event_key",
                "source",
                "event_state",
                "reconcile_status",
                "seen_count",
                "first_received_at",
                "last_received_at",
                "trigger_match",
                "trigger_rule_version",
                "trigger_campaign",
                "trigger_campaign_version",
                "canary",
                "reply_actions",
            ]

    serializer_class = OutputSerializer

    def get_queryset(self) -> QuerySet:
        query = validated_query(self.Query, self.request)
        return event_list(
            event_key=query.get("event_key", ""),
            source=query.get("source", ""),
            state=query.get("state", ""),
        ).using(read_alias(self.request))  # the replica when one is set; its prefetch follows


# The OpenAPI description of the event list, merged into /api/schema/ (console/api/schema.py).
OPENAPI_SCHEMAS: dict[str, Any] = {
    "ReplyActionSummary": {
        "type": "object",
        "additionalProperties": False,
        "required": ["reply_key", "purpose", "approval_state", "delivery_state"],
        "properties": {
            "reply_key": {"type": "string"},
            "purpose": {"type": "string"},
            "approval_state": {"enum": list(ApprovalState.values)},
            "delivery_state": {"enum": list(DeliveryState.values)},
        },
    },
    "Event": {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "event_key",
            "source",
            "event_state",
            "reconcile_status",
            "seen_count",
            "first_received_at",
            "last_received_at",
            "trigger_match",
            "trigger_rule_version",
            "trigger_campaign",
            "trigger_campaign_version",
            "canary",
            "reply_actions",
        ],
        "properties": {
            "event_key": {"type": "string"},
            "source": {"type": "string"},
            "event_state": {"enum": list(EventState.values)},
            # What the last complete scan showed: UNRECONCILED, MATCHED or SOURCE_UNVERIFIED.
            "reconcile_status": {"enum": list(ReconcileStatus.values)},
            "seen_count": {"type": "integer", "minimum": 1},
            "first_received_at": date_time_schema(),
            "last_received_at": date_time_schema(),
            "trigger_match": {"type": "boolean"},
            # The version of the source's rules, and the campaign (its id and version) that matched.
            "trigger_rule_version": {"type": "integer", "minimum": 1},
            "trigger_campaign": {"type": ["integer", "null"]},
            "trigger_campaign_version": {"type": ["integer", "null"], "minimum": 1},
            "canary": {"type": "boolean"},
            "reply_actions": {"type": "array", "items": {"$ref": "#/components/schemas/ReplyActionSummary"}},
        },
    },
    "EventPage": page_schema("#/components/schemas/Event"),
}

OPENAPI_PATHS: dict[str, Any] = {
    "/api/events/": {
        "get": list_operation(
            "Canonical events with their reply actions",
            "#/components/schemas/EventPage",
            [
                text_parameter(
                    "event_key",
                    InboundEvent._meta.get_field("event_key").max_length,
                    "exactly this event key",
                ),
                text_parameter("source", 64, "events of the source with this name"),
                {
                    "name": "state",
                    "in": "query",
                    "required": False,
                    "description": "events in this state",
                    "schema": {"enum": list(EventState.values)},
                },
            ],
        )
    },
}
