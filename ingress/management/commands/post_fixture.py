"""post_fixture: sign a synthetic fixture with a source's secret and POST it to the webhook."""

import json
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from conduit.providers.base import SecretUnavailable
from conduit.providers.registry import get_adapter
from ingress.models import Source
from ingress.services import source_secret


class Command(BaseCommand):
    help = "Sign a fixture file the way the provider would and deliver it over HTTP."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "path", type=Path, help="a fixture file, e.g. fixtures/sandbox_social/comment__batch.json"
        )
        parser.add_argument("--source", required=True, help="the registered source name")
        parser.add_argument("--url", default="http://127.0.0.1:8000", help="Conduit's base URL")
        parser.add_argument("--delivery-id", default="", help="reuse an id to simulate a provider retry")

    def handle(self, *args, path: Path, source: str, url: str, delivery_id: str, **options) -> None:
        registered = Source.objects.filter(name=source).first()
        if registered is None:
            raise CommandError(f"no source named {source!r}; register it with register_source")
        try:
            body = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        try:
            secret = source_secret(registered)
        except SecretUnavailable as exc:
            raise CommandError(str(exc)) from None
        headers = get_adapter(registered.adapter).sign(
            body=body,
            secret=secret,
            delivery_id=delivery_id or f"msg_{uuid.uuid4().hex}",
            at=timezone.now(),
        )
        request = urllib.request.Request(
            f"{url.rstrip('/')}/webhooks/{source}/",
            data=body,
            method="POST",
            headers={**headers, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, payload = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, exc.read()
        except urllib.error.URLError as exc:
            raise CommandError(f"cannot reach {url}: {exc.reason}") from None
        try:
            shown = json.dumps(json.loads(payload), indent=2)
        except ValueError:
            shown = payload.decode("utf-8", "replace")[:500]
        self.stdout.write(f"HTTP {status}\n{shown}")
        if status >= 400:
            raise CommandError(f"delivery refused with HTTP {status}")
