"""WSGI entry point for Conduit: webhooks on a lean handler, everything else on Django's own."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "conduit.settings")
application = get_wsgi_application()

from conduit.handlers import webhooks_apart  # noqa: E402  (needs Django set up)

application = webhooks_apart(application)
