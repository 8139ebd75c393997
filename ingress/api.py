"""The read API: canonical events with their reply actions, and quarantine receipts."""

from django.db.models import Prefetch, QuerySet
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import CursorPagination

from ingress.models import EventState, InboundEvent, QuarantineReceipt, QuarantineState
from replies.models import ReplyAction


class NewestFirst(CursorPagination):
    ordering = "-id"
    page_size = 50
    max_page_size = 500
    page_size_query_param = "page_size"


def filter_source_and_state(
    request, queryset: QuerySet, *, state_field: str, states: list[str]
) -> QuerySet:
    """Apply ?source=<name> and ?state=<one of states>; an unknown state is a 400."""
    params = request.query_params
    if params.get("source"):
        queryset = queryset.filter(source__name=params["source"])
    state = params.get("state")
    if state is not None:
        if state not in states:
            raise ValidationError({"state": f"expected one of: {', '.join(states)}"})
        queryset = queryset.filter(**{state_field: state})
    return queryset


class EventList(generics.ListAPIView):
    """GET /api/events/?event_key=&source=&state=: canonical records with their reply actions."""

    pagination_class = NewestFirst

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
                "event_key", "source", "event_state", "seen_count", "first_received_at",
                "last_received_at", "trigger_match", "canary", "reply_actions",
            ]

    serializer_class = OutputSerializer

    def get_queryset(self) -> QuerySet:
        queryset = InboundEvent.objects.select_related("source").prefetch_related(
            Prefetch("reply_actions", queryset=ReplyAction.objects.order_by("purpose"))
        )
        if self.request.query_params.get("event_key"):
            queryset = queryset.filter(event_key=self.request.query_params["event_key"])
        return filter_source_and_state(
            self.request, queryset, state_field="event_state", states=EventState.values
        )


class QuarantineList(generics.ListAPIView):
    """GET /api/quarantine/?source=&state=: quarantine receipts, newest first."""

    pagination_class = NewestFirst

    class OutputSerializer(serializers.ModelSerializer):
        source = serializers.SlugRelatedField(slug_field="name", read_only=True)

        class Meta:
            model = QuarantineReceipt
            fields = ["receipt_id", "reason_code", "received_at", "source", "state", "authenticated"]

    serializer_class = OutputSerializer

    def get_queryset(self) -> QuerySet:
        return filter_source_and_state(
            self.request, QuarantineReceipt.objects.select_related("source"),
            state_field="state", states=QuarantineState.values,
        )
