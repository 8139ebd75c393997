"""The webhook routes' own handler: only the middleware a provider's POST needs.

A provider's delivery carries no session, cookie or signed-in user and is
exempt from CSRF, so the back office's sessions, CSRF, authentication, TOTP,
messages, replica pinning, frame options and sign-in lock-out layers are work
without a purpose on the one path that must be fast. Requests under
/webhooks/ go to a handler built with WEBHOOK_MIDDLEWARE instead: the webhook
metrics (outermost, as in MIDDLEWARE), the security headers and HTTPS
redirect, and CommonMiddleware (ALLOWED_HOSTS is still enforced). Everything
else goes through settings.MIDDLEWARE unchanged.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.exception import convert_exception_to_response
from django.core.handlers.wsgi import WSGIHandler
from django.utils.module_loading import import_string

WEBHOOK_PREFIX = "/webhooks/"
WEBHOOK_MIDDLEWARE = [
    "conduit.metrics.WebhookMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.common.CommonMiddleware",
]
# Hooks Django's loader would collect; the webhook chain's middleware has none, and must not.
HOOKS = ("process_view", "process_template_response", "process_exception")


class WebhookHandler(WSGIHandler):
    """Django's WSGI handler with WEBHOOK_MIDDLEWARE in place of settings.MIDDLEWARE."""

    def load_middleware(self, is_async: bool = False) -> None:
        # The chain is built as Django's loader builds it (each layer wrapped so an exception
        # becomes a response), from this list instead of settings.MIDDLEWARE. Synchronous only.
        self._view_middleware, self._template_response_middleware, self._exception_middleware = [], [], []
        handler = convert_exception_to_response(self._get_response)
        for path in reversed(WEBHOOK_MIDDLEWARE):
            layer = import_string(path)(handler)
            if any(hasattr(layer, hook) for hook in HOOKS):
                raise ImproperlyConfigured(f"{path} has hooks the webhook handler does not run")
            handler = convert_exception_to_response(layer)
        self._middleware_chain = handler


def webhooks_apart(application):
    """A WSGI application sending /webhooks/ to a WebhookHandler and the rest to `application`."""
    webhooks = WebhookHandler()

    def dispatch(environ, start_response):
        if environ.get("PATH_INFO", "").startswith(WEBHOOK_PREFIX):
            return webhooks(environ, start_response)
        return application(environ, start_response)

    return dispatch
