"""URL map: the webhook endpoint, the read API, the admin, and health and metrics."""

from django.contrib import admin
from django.urls import path, re_path

from conduit import health, metrics
from conduit.api import api_not_found
from console.api.events import EventList
from console.api.quarantine import QuarantineList
from console.api.schema import OpenAPIView
from ingress.user_callbacks import DeletionStatusView, UserCallbackView
from ingress.views import SharedCallbackView, WebhookView
from reconcile.api import DecisionView

# Meta's app callback: one endpoint per Meta app, its bodies bounded by Meta's own limit.
meta_callback = SharedCallbackView.as_view(
    platform="meta", body_limit_setting="CONDUIT_META_WEBHOOK_MAX_BYTES"
)

urlpatterns = [
    # The Meta app's user callbacks (App settings: deauthorize and data deletion request URLs).
    path(
        "webhooks/meta/<str:app_id>/deauthorize/",
        UserCallbackView.as_view(platform="meta", kind="deauthorize"),
        name="webhook-meta-deauthorize",
    ),
    path(
        "webhooks/meta/<str:app_id>/deletion/",
        UserCallbackView.as_view(platform="meta", kind="deletion"),
        name="webhook-meta-deletion",
    ),
    path(
        "webhooks/meta/<str:app_id>/deletion/<str:code>/",
        DeletionStatusView.as_view(platform="meta"),
        name="webhook-meta-deletion-status",
    ),
    path("webhooks/meta/<str:app_id>/", meta_callback, name="webhook-meta"),
    re_path(r"^webhooks/meta/(?P<app_id>[^/]+)$", meta_callback, name="webhook-meta-no-slash"),
    path("webhooks/<str:source_name>/", WebhookView.as_view(), name="webhook"),
    # Without the slash too: APPEND_SLASH would answer a POST with a redirect, and a sender
    # that does not follow it would lose the delivery.
    re_path(r"^webhooks/(?P<source_name>[^/]+)$", WebhookView.as_view(), name="webhook-no-slash"),
    path("api/events/", EventList.as_view(), name="api-events"),
    path("api/quarantine/", QuarantineList.as_view(), name="api-quarantine"),
    path("api/decisions/", DecisionView.as_view(), name="api-decisions"),
    path("api/schema/", OpenAPIView.as_view(), name="api-schema"),
    # Last of the API: every other path under /api/ is a JSON 404 (any method, DEBUG or not).
    re_path(r"^api/", api_not_found, name="api-not-found"),
    path("admin/", admin.site.urls),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
]

# JSON under /api/, Django's HTML pages elsewhere (conduit/api.py).
handler400 = "conduit.api.handler400"
handler403 = "conduit.api.handler403"
handler404 = "conduit.api.handler404"
handler500 = "conduit.api.handler500"
