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


def _choice(request, name: str, allowed: list[str]) -> str | None:
    value = request.query_params.get(name)
    if value is not None and value not in allowed:
        raise ValidationError({name: f"expected one of: {', '.join(allowed)}"}, code="invalid_filter")
    return value


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
        params = self.request.query_params
        if params.get("event_key"):
            queryset = queryset.filter(event_key=params["event_key"])
        if params.get("source"):
            queryset = queryset.filter(source__name=params["source"])
        state = _choice(self.request, "state", EventState.values)
        if state:
            queryset = queryset.filter(event_state=state)
        return queryset


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
        queryset = QuarantineReceipt.objects.select_related("source")
        params = self.request.query_params
        if params.get("source"):
            queryset = queryset.filter(source__name=params["source"])
        state = _choice(self.request, "state", QuarantineState.values)
        if state:
            queryset = queryset.filter(state=state)
        return queryset
