"""URL map: the webhook endpoint, the read API and the admin."""

from django.contrib import admin
from django.urls import path

from ingress.api import EventList, QuarantineList
from ingress.views import WebhookView
from reconcile.api import DecisionView, OpenAPIView

urlpatterns = [
    path("webhooks/<str:source_name>/", WebhookView.as_view(), name="webhook"),
    path("api/events/", EventList.as_view(), name="api-events"),
    path("api/quarantine/", QuarantineList.as_view(), name="api-quarantine"),
    path("api/decisions/", DecisionView.as_view(), name="api-decisions"),
    path("api/schema/", OpenAPIView.as_view(), name="api-schema"),
    path("admin/", admin.site.urls),
]
