"""register_source: create a source with its reply routes and copy, confirm identical ones, or rename one."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from conduit.providers.registry import ADAPTERS, DEFAULT_TRANSPORT
from ingress.services import SourceConflict, source_register
from replies.selectors import copy_current
from replies.services import RouteConflict, reply_copy_create, reply_route_declare

# The option a source field is given by where their names differ (flags are the operator's
# contract): a refused value is reported under the option's name, as it always was.
FIELD_OPTIONS = {"app_id": "meta_app_id"}


class Command(BaseCommand):
    help = (
        "Register a source, where each of its reply purposes is sent, and its approved copy. "
        "Running it again with the same values changes nothing; conflicting values are refused "
        "(edit a source or a route in the admin). Running it with a new NAME and otherwise the same "
        "values renames the source: its history stays, its webhook path becomes /webhooks/NAME/ "
        "(a Meta source's callback is per app id and does not change) and the old name is free."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="URL slug: deliveries go to /webhooks/NAME/")
        parser.add_argument("--adapter", required=True, choices=sorted(ADAPTERS))
        parser.add_argument("--account-ref", required=True, help="the source account identifier")
        parser.add_argument(
            "--event-type",
            action="append",
            required=True,
            dest="event_types",
            help="an allowlisted event type (repeat for more)",
        )
        parser.add_argument(
            "--purpose",
            action="append",
            default=[],
            dest="purposes",
            help="a declared reply purpose, e.g. public_ack (repeat for more)",
        )
        parser.add_argument(
            "--trigger-keyword",
            action="append",
            default=[],
            dest="trigger_keywords",
            help="a keyword whose presence plans replies (repeat for more)",
        )
        parser.add_argument(
            "--secret-env",
            required=True,
            action="append",
            dest="secret_envs",
            help="NAME of the environment variable holding the signing secret (sandbox: whsec_...; "
            "Meta: the app secret). Meta sources may repeat it once: either secret is accepted "
            "while an app secret is being changed",
        )
        app_callback = parser.add_argument_group("Meta sources (--adapter meta-instagram | meta-page)")
        app_callback.add_argument(
            "--meta-app-id", default="", help="the Meta app whose callback delivers this account"
        )
        app_callback.add_argument(
            "--verify-token-env", default="", help="NAME of the variable holding the callback's verify token"
        )
        app_callback.add_argument(
            "--token-env", default="", help="NAME of the variable holding the access token reads present"
        )
        app_callback.add_argument(
            "--graph-url",
            default=None,
            help="Graph API base URL with version (default: the adapter's Meta host with "
            "CONDUIT_GRAPH_API_VERSION; a loopback URL points at the Graph simulator)",
        )
        parser.add_argument("--contract-version", default="event-v1")
        parser.add_argument("--retention-days", type=int, default=30)
        parser.add_argument(
            "--copy",
            action="append",
            default=[],
            dest="copies",
            metavar="PURPOSE=TEXT",
            help="approved reply copy for a purpose (repeat per purpose)",
        )
        parser.add_argument(
            "--channel",
            action="append",
            default=[],
            dest="channels",
            metavar="PURPOSE=CHANNEL",
            help="destination channel for a purpose's copy (default: the purpose's name)",
        )
        parser.add_argument(
            "--transport",
            default=None,
            help="where approved replies of every purpose without a --route are sent",
        )
        parser.add_argument(
            "--transport-url",
            default="",
            help="the transport's base URL for every purpose without a --route; also the source "
            "URL reconciliation reads pages from, unless --source-url is given",
        )
        parser.add_argument(
            "--route",
            action="append",
            default=[],
            dest="routes",
            metavar="PURPOSE=TRANSPORT[,URL]",
            help="route one purpose's replies through its own transport and URL (repeat per purpose)",
        )
        parser.add_argument(
            "--source-url",
            default=None,
            help="base URL reconciliation reads the source's pages from",
        )
        parser.add_argument(
            "--canary",
            action="store_true",
            help="mark this a trusted test source: its events are canaries and never sent",
        )

    def handle(self, *args, **options) -> None:
        copies = self._pairs(options["copies"], "--copy")
        channels = self._pairs(options["channels"], "--channel")
        routes = self._routes(options)
        unknown = (set(copies) | set(channels) | set(routes)) - set(options["purposes"])
        if unknown:
            raise CommandError(f"not declared with --purpose: {', '.join(sorted(unknown))}")
        try:
            with transaction.atomic():
                source, created = self._register(options)
                notes = [self._route(source, purpose, *routes[purpose]) for purpose in routes]
                notes += [
                    self._copy(source, purpose, text, channels.get(purpose, purpose))
                    for purpose, text in copies.items()
                ]
        except (SourceConflict, RouteConflict) as exc:
            raise CommandError(str(exc)) from None
        except ValidationError as exc:
            problems = "; ".join(
                f"{FIELD_OPTIONS.get(k, k)}: {' '.join(v)}" for k, v in exc.message_dict.items()
            )
            raise CommandError(f"invalid source: {problems}") from None
        callback = ADAPTERS[source.adapter].shared_callback
        where = (
            f"/webhooks/{callback.platform}/{source.app_id}/"
            if callback is not None and source.app_id
            else f"/webhooks/{source.name}/"
        )
        renamed_from = getattr(source, "renamed_from", "")
        if renamed_from:
            self.stdout.write(
                f"source {source.name}: renamed from {renamed_from}; its events, replies, scan "
                f"state and reports stay with it"
            )
            if callback is not None and source.app_id:
                self.stdout.write(
                    f"webhooks: {callback.label}'s callback {where} is per app id, so it does not change"
                )
            else:
                self.stdout.write(
                    f"webhooks: now {where}; /webhooks/{renamed_from}/ answers 404 from now on: "
                    f"point the provider's webhook URL at {where}. The name {renamed_from} is free "
                    "for a new registration"
                )
        else:
            verb = "registered" if created else "unchanged, already registered with these values"
            self.stdout.write(f"source {source.name}: {verb} ({where})")
        for note in notes:
            self.stdout.write(note)

    @staticmethod
    def _pairs(values: list[str], flag: str) -> dict[str, str]:
        pairs = {}
        for value in values:
            key, sep, text = value.partition("=")
            if not sep or not key.strip() or not text.strip():
                raise CommandError(f"{flag} takes PURPOSE=VALUE, got {value!r}")
            pairs[key.strip()] = text.strip()
        return pairs

    @classmethod
    def _routes(cls, options: dict) -> dict[str, tuple[str, str]]:
        """Every declared purpose -> (transport, URL): its --route, else --transport/--transport-url."""
        routes = {}
        for purpose, spec in cls._pairs(options["routes"], "--route").items():
            transport, _, url = spec.partition(",")
            if not transport.strip():
                raise CommandError(f"--route takes PURPOSE=TRANSPORT[,URL], got {purpose}={spec}")
            routes[purpose] = (transport.strip(), url.strip())
        default = options["transport"]
        adapter = ADAPTERS[options["adapter"]]
        if default is None and adapter.shared_callback is not None:
            # The adapter's default transport for each purpose it declares one for (a comment reply,
            # a private reply...), all through the source's own read URL, unless routed otherwise.
            defaults = adapter.default_routes
            url = cls._graph_url(options)
            declared = {p: (defaults[p], url) for p in options["purposes"] if p in defaults}
            unrouted = [p for p in options["purposes"] if p not in routes and p not in declared]
            if unrouted:
                raise CommandError(
                    f"route {', '.join(unrouted)} with --route PURPOSE=TRANSPORT[,URL] or --transport: only "
                    f"{' and '.join(defaults)} have a default transport on a "
                    f"{adapter.shared_callback.label} source"
                )
            return {**declared, **routes}
        default = default or DEFAULT_TRANSPORT
        return {**{p: (default, options["transport_url"]) for p in options["purposes"]}, **routes}

    @staticmethod
    def _graph_url(options: dict) -> str:
        adapter = ADAPTERS[options["adapter"]]
        return (
            options["graph_url"]
            or options["source_url"]
            or f"{adapter.graph_host}/{settings.CONDUIT_GRAPH_API_VERSION}"
        )

    @staticmethod
    def _route(source, purpose: str, transport: str, url: str) -> str:
        route, made = reply_route_declare(
            source_id=source.pk,
            purpose=purpose,
            transport_name=transport,
            target_url=url,
        )
        where = f"{route.transport_name} {route.target_url}".rstrip()
        return f"route {purpose}: {where} ({'declared' if made else 'unchanged'})"

    @staticmethod
    def _copy(source, purpose: str, text: str, channel: str) -> str:
        current = copy_current(source_id=source.pk, purpose=purpose)
        if current and (current.text, current.channel) != (text, channel):
            raise SourceConflict(
                f"purpose {purpose!r} already has approved copy {current.copy_version} with another "
                "text or channel; add a new version under Replies > Reply copies if that is intended"
            )
        copy, made = reply_copy_create(
            source_id=source.pk, purpose=purpose, channel=channel, text=text, actor="register_source"
        )
        return f"copy {purpose}: {'approved as ' + copy.copy_version if made else 'unchanged'}"

    @staticmethod
    def _register(options: dict):
        adapter = ADAPTERS[options["adapter"]]
        secrets = options["secret_envs"]
        callback = adapter.shared_callback
        most = callback.max_secrets if callback is not None else 1
        if len(secrets) > most:
            raise CommandError(f"--secret-env is given at most {most} time(s) for {adapter.name}")
        source_url = options["source_url"]
        if callback is not None:
            if options["graph_url"] is not None and source_url is not None:
                raise CommandError("give --graph-url or --source-url, not both")
            source_url = Command._graph_url(options)
        elif options["graph_url"] or options[FIELD_OPTIONS["app_id"]] or options["verify_token_env"]:
            raise CommandError("--graph-url, --meta-app-id and --verify-token-env are for Meta sources")
        return source_register(
            name=options["name"],
            adapter=options["adapter"],
            account_ref=options["account_ref"],
            event_types=options["event_types"],
            purposes=options["purposes"],
            trigger_keywords=options["trigger_keywords"],
            contract_version=options["contract_version"],
            retention_days=options["retention_days"],
            canary=options["canary"],
            source_url=options["transport_url"] if source_url is None else source_url,
            app_id=options[FIELD_OPTIONS["app_id"]],
            verify_token_env=options["verify_token_env"],
            token_env=options["token_env"],
            secret_env=secrets[0],
            secret_env_next=secrets[1] if len(secrets) > 1 else "",
        )
