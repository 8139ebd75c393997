"""graph_simulator: run the loopback Graph API simulator (Meta's reads, writes, webhooks and failures)."""

import os
import signal
import threading

from django.core.management.base import BaseCommand, CommandError, CommandParser

from simulators.meta import serve


class Command(BaseCommand):
    help = (
        "Serve a Graph API simulator on 127.0.0.1 (Facebook host at /vNN.N/, Instagram host at "
        "/instagram/vNN.N/, control API at /_sim/)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8766, help="0 picks a free port")
        parser.add_argument(
            "--host", default="127.0.0.1", help="a loopback address; anything else is refused"
        )
        parser.add_argument(
            "--state",
            metavar="FILE",
            help="SQLite file holding the simulator's state across restarts "
            "(default: in memory, lost on exit)",
        )
        parser.add_argument(
            "--callback", metavar="URL", help="loopback webhook URL notifications are posted to"
        )
        parser.add_argument("--app-id", help="the Meta app id notifications and subscriptions are for")
        parser.add_argument(
            "--secret-env",
            metavar="VAR",
            help="name of the environment variable holding the app secret that signs "
            "notifications (never the secret itself)",
        )
        parser.add_argument(
            "--batch",
            action="store_true",
            help="queue notifications until POST /_sim/notify sends them as one body",
        )
        parser.add_argument(
            "--hang-seconds", type=float, default=15.0, help="how long a timeout fault holds a request"
        )
        parser.add_argument("--api-version", default="v26.0", help="version shown in the printed URLs")

    def handle(
        self,
        *args,
        port: int,
        host: str,
        state: str | None,
        callback: str | None,
        app_id: str | None,
        secret_env: str | None,
        batch: bool,
        hang_seconds: float,
        api_version: str,
        **options,
    ) -> None:
        secret = None
        if callback:
            if not (app_id and secret_env):
                raise CommandError("--callback needs --app-id and --secret-env")
            secret = os.environ.get(secret_env)
            if not secret:
                raise CommandError(f"environment variable {secret_env} is not set (it holds the app secret)")
        try:
            simulator = serve(
                port=port,
                host=host,
                state_path=state,
                callback=callback,
                app_id=app_id,
                app_secret=secret,
                batch=batch,
                hang_seconds=hang_seconds,
                version=api_version,
            )
        except (ValueError, OSError) as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"graph simulator on {simulator.root} (facebook: {simulator.url}, instagram: "
            f"{simulator.instagram_url}; state: {state or 'memory'}; callback: {callback or 'none'}"
            f"{', batched' if batch else ''})"
        )
        self.stdout.flush()
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
        simulator.close()
