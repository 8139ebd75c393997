"""Django settings for Conduit, read from the environment with django-environ."""

import re
from datetime import timedelta
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

# Pure (no app; Django only inside the check): the ranged settings' table.
from conduit.checks import range_refusal

# Pure (no Django, no app): Meta's documented bound on one body.
from conduit.providers.meta.webhook import MAX_BODY_BYTES as META_MAX_BODY_BYTES

BASE_DIR = Path(__file__).resolve().parent.parent


class _Env(environ.Env):
    """django-environ's reader, remembering each variable a setting reads: those are the
    server's own, which no source may name for a credential (CONDUIT_SERVER_VARIABLES)."""

    read: set[str] = set()

    def get_value(self, var, *args, **kwargs):
        self.read.add(var)
        return super().get_value(var, *args, **kwargs)


env = _Env(
    DEBUG=(bool, False),
    ALLOWED_HOSTS=(list, ["127.0.0.1", "localhost"]),
    CONDUIT_WEBHOOK_MAX_BYTES=(int, 1024 * 1024),
    CONDUIT_RETRY_AFTER_SECONDS=(int, 5),
    CONDUIT_LOG_LEVEL=(str, "INFO"),
)

# A local env file (the one `make demo` writes) fills what the environment does not set, so a
# command pasted from the demo's banner runs as printed. The environment always wins. manage.py
# names .demo.env beside it unless CONDUIT_ENV_FILE names another; a process started otherwise
# (gunicorn, the test runner) reads only a file the environment names.
ENV_FILE = Path(env.str("CONDUIT_ENV_FILE")) if env.str("CONDUIT_ENV_FILE", default="") else None
if ENV_FILE is not None and ENV_FILE.is_file():
    environ.Env.read_env(ENV_FILE, overwrite=False)

# Nothing secret has a default: a missing SECRET_KEY stops the process with
# django-environ's ImproperlyConfigured naming the variable.
SECRET_KEY = env("SECRET_KEY")
DEBUG = env("DEBUG")
ALLOWED_HOSTS = env("ALLOWED_HOSTS")

INSTALLED_APPS = [
    # django.contrib.admin, its site a second-factor door when CONDUIT_ADMIN_2FA=required.
    "conduit.door.apps.DoorAdminConfig",
    "django.contrib.auth",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "axes",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "django_q",
    "ingress",
    "replies",
    "reconcile",
    "console",
    "platforms",
    # The platforms' stand-ins and their commands (graph_simulator, sandbox_provider).
    "simulators",
]

# The stand-ins' package: conduit/standins.py loads from it, by dotted path, what the canary and the
# acceptance checks use (the sandbox provider, the Graph API simulator, the testkit); no app imports it.
CONDUIT_STAND_INS = "simulators"

# /readyz: ready only if a django-q2 worker finished a task within this many seconds.
CONDUIT_READY_WORKER_SECONDS = env.int("CONDUIT_READY_WORKER_SECONDS", default=120)
# /metrics: bearer token Prometheus presents. Without one, /metrics answers only while
# CONDUIT_METRICS_LOOPBACK=on, the deployment's word that no proxy stands in front of this
# server, and then only connections from this host.
CONDUIT_METRICS_TOKEN = env.str("CONDUIT_METRICS_TOKEN", default="")
CONDUIT_METRICS_LOOPBACK = env.str("CONDUIT_METRICS_LOOPBACK", default="off").lower() == "on"
# A worker node ends and restarts its cluster when work is due and no task has finished
# for this many seconds (0: never). Read from the task tables (conduit/watchdog.py).
CONDUIT_WORKER_WATCHDOG_SECONDS = env.int("CONDUIT_WORKER_WATCHDOG_SECONDS", default=180)
# Variables a source may name for its credentials (signing secret, verify token, access
# token): names starting with one of these prefixes, comma-separated. A name Conduit reads
# as a setting is refused whatever the prefixes.
CONDUIT_CREDENTIAL_PREFIXES = tuple(
    prefix.strip()
    for prefix in env.str("CONDUIT_CREDENTIAL_PREFIXES", default="CONDUIT_SOURCE_").split(",")
    if prefix.strip()
)

# Keys that encrypt the access tokens Conduit stores (conduit/credentials.py), comma-separated
# Fernet keys: the first encrypts, every one decrypts; `manage.py credentials_rotate` re-encrypts
# under the first. Unset: no credential can be stored, and a deployment holding some refuses to start.
CONDUIT_CREDENTIAL_KEYS = tuple(
    key.strip() for key in env.str("CONDUIT_CREDENTIAL_KEYS", default="").split(",") if key.strip()
)

MIDDLEWARE = [
    # Outermost: counts every webhook request by source and status, refusals included.
    "conduit.metrics.WebhookMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # request.user.is_verified(): the session's TOTP verification (conduit/door/).
    "django_otp.middleware.OTPMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # The admin's list pages read the replica when one is set; an unsafe request pins the primary.
    "conduit.routers.ReplicaReadsMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last: turns a locked-out sign-in into django-axes's 429 page.
    "axes.middleware.AxesMiddleware",
]

# Staff sign-in: "required" asks for a TOTP code after the password (django-otp); "off" does not.
CONDUIT_ADMIN_2FA = env.str("CONDUIT_ADMIN_2FA", default="off").lower()
if CONDUIT_ADMIN_2FA not in ("off", "required"):
    raise ImproperlyConfigured("CONDUIT_ADMIN_2FA is off or required")
# The issuer name an authenticator app shows beside the account.
OTP_TOTP_ISSUER = env.str("CONDUIT_TOTP_ISSUER", default="Conduit")
AUTHENTICATION_BACKENDS = [
    # django-axes first: a locked-out sign-in is refused before the password is checked.
    "conduit.door.throttle.SignInThrottle",
    "django.contrib.auth.backends.ModelBackend",
]
# Failed sign-ins are counted per (username, client address) in the database, so every web
# node sees the same count; the lock lifts after the cool-off or `manage.py axes_reset`.
AXES_FAILURE_LIMIT = env.int("CONDUIT_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("CONDUIT_LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_ONLY_ADMIN_SITE = True
# Off: no "AXES: BEGIN version ..." line at every manage.py start, and a lockout's log line names
# only the parameters it counts (username, address), not the user agent as well.
AXES_VERBOSE = False

# HTTPS is ended by a proxy (load balancer, nginx) in front of every web node. On, Django trusts
# its X-Forwarded-Proto, redirects plain HTTP, marks cookies Secure and sends HSTS. The proxy
# must set that header itself and drop any a client sent.
CONDUIT_BEHIND_TLS_PROXY = env.str("CONDUIT_BEHIND_TLS_PROXY", default="off").lower() == "on"
if CONDUIT_BEHIND_TLS_PROXY and CONDUIT_METRICS_LOOPBACK:
    raise ImproperlyConfigured(
        "CONDUIT_METRICS_LOOPBACK=on says no proxy stands in front of this server, "
        "CONDUIT_BEHIND_TLS_PROXY=on that one does: set CONDUIT_METRICS_TOKEN instead"
    )
if CONDUIT_BEHIND_TLS_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    # Probes and Prometheus reach each node directly over plain HTTP: answered, not redirected.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    # One year with subdomains and the preload directive; the directive alone lists nothing
    # (submitting the domain to the browsers' preload list is a separate, deliberate step).
    SECURE_HSTS_SECONDS = env.int("CONDUIT_HSTS_SECONDS", default=31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("CONDUIT_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env.bool("CONDUIT_HSTS_PRELOAD", default=True)
    # The client's address for sign-in throttling: the one the proxy appended, never one a
    # client wrote into X-Forwarded-For itself.
    AXES_IPWARE_PROXY_COUNT = 1
    AXES_IPWARE_META_PRECEDENCE_ORDER = ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"]
else:
    # No proxy: a client-supplied X-Forwarded-For would let a guesser change address at will.
    AXES_IPWARE_META_PRECEDENCE_ORDER = ["REMOTE_ADDR"]

ROOT_URLCONF = "conduit.urls"
WSGI_APPLICATION = "conduit.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# The embedded default is a SQLite file beside manage.py; production and the
# test suite set DATABASE_URL to PostgreSQL.
DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'conduit.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Ingest writes from several request threads; wait for the write lock
    # instead of failing at once.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("timeout", 20)
    DATABASES["default"]["OPTIONS"].setdefault("transaction_mode", "IMMEDIATE")
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("CONN_MAX_AGE", default=60))
    # Off by default: a health check is one more round trip on every request.
    # A connection that died while idle fails one request with a retryable 503
    # (nothing is half-written) and Django replaces it when that request ends.
    DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", env.bool("CONN_HEALTH_CHECKS", default=False))
    # Server-side binding: psycopg sends the parameters apart from the statement. A statement
    # a connection has run CONDUIT_DB_PREPARE_THRESHOLD times is prepared, so the hot paths'
    # statements are parsed and planned once per connection (Django turns psycopg's preparing
    # off unless told; "off" keeps it off, for a pooler in transaction mode).
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault(
        "server_side_binding", env.bool("CONDUIT_DB_SERVER_BINDING", default=True)
    )
    _prepare = env.str("CONDUIT_DB_PREPARE_THRESHOLD", default="5").strip().lower()
    if _prepare != "off":
        if not _prepare.isdigit():
            raise ImproperlyConfigured(
                f"CONDUIT_DB_PREPARE_THRESHOLD must be a whole number or off, not {_prepare!r}"
            )
        DATABASES["default"]["OPTIONS"].setdefault("prepare_threshold", int(_prepare))
    # on: Django's psycopg pool per process instead of one connection per thread kept for
    # CONN_MAX_AGE (Django requires CONN_MAX_AGE=0 with a pool). Closed before django-q2 forks.
    if env.str("CONDUIT_DB_POOL", default="off").lower() == "on":
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": env.int("CONDUIT_DB_POOL_MIN_SIZE", default=2),
            "max_size": env.int("CONDUIT_DB_POOL_MAX_SIZE", default=10),
            # How long a request waits for a pooled connection: an outage is a 503 this soon
            # (psycopg_pool's own default is 30 s).
            "timeout": env.float("CONDUIT_DB_POOL_TIMEOUT_SECONDS", default=5.0),
        }
        from conduit.routers import register_pool_fork_guard

        register_pool_fork_guard()
    # A streaming replica: the read API, the admin's list pages and report exports read it
    # (conduit/routers.py); every write, claim, lease and transition stays on the primary.
    if env.str("DATABASE_REPLICA_URL", default=""):
        replica = env.db("DATABASE_REPLICA_URL")
        replica["OPTIONS"] = {**DATABASES["default"].get("OPTIONS", {}), **replica.get("OPTIONS", {})}
        replica["CONN_MAX_AGE"] = DATABASES["default"]["CONN_MAX_AGE"]
        replica["CONN_HEALTH_CHECKS"] = DATABASES["default"]["CONN_HEALTH_CHECKS"]
        # Never a test database of its own: under a test runner it stands for the primary's.
        replica["TEST"] = {"MIRROR": "default"}
        DATABASES["replica"] = replica
DATABASE_ROUTERS = ["conduit.routers.PrimaryReplicaRouter"]
# Seconds after a browser's unsafe request (an admin action) during which its pages read the primary.
CONDUIT_REPLICA_PIN_SECONDS = env.int("CONDUIT_REPLICA_PIN_SECONDS", default=10)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
# The operator's time zone: the admin and reports show times in it (storage stays UTC).
TIME_ZONE = env.str("CONDUIT_TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # A session answers to the admin's rules (staff, second factor), a token to its user's
    # permissions; each view names the model permissions it needs (conduit/api.py).
    "DEFAULT_PERMISSION_CLASSES": ["conduit.api.AdminRules"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON only: refuses overflowing numbers, lone surrogates and deep nesting as 400s (conduit/api.py).
    "DEFAULT_PARSER_CLASSES": ["conduit.api.JSONParser"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.CursorPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "conduit.api.exception_handler",
}

# django-q2 on its ORM broker: no Redis needed. The queue is at-least-once: a
# task whose worker dies or overruns is delivered again. That is harmless here,
# because the claim (APPROVED -> SENDING, committed before the transport is
# called) makes every send at-most-once: a redelivered task finds nothing to claim.
Q_CLUSTER = {
    "name": "conduit",
    "orm": "default",
    "workers": env.int("CONDUIT_Q_WORKERS", default=2),
    # A send task is killed after this many seconds; the transport's own
    # timeout (10 s) ends every call well before.
    "timeout": 60,
    # Must exceed timeout: a task not acknowledged within 90 s is handed out
    # again (the ORM broker's redelivery), which the claim makes harmless.
    "retry": 90,
    # Deliveries of one task at most; retries of a send that failed before
    # sending are the sender's own (backoff under the same reply key), not the queue's.
    "max_attempts": 3,
    "ack_failures": True,
    "catch_up": False,
    "poll": 0.5,
}
# "orm" (the default: no Redis) or a redis:// URL: django-q2 on Redis. Redis hands a task out
# once and keeps nothing after (no redelivery; a restart or a flush loses what was queued). That
# is harmless: the schedules live in the database and the send_due one queues every due action
# each minute, the claim makes a duplicate a no-op, and the sweeper parks a send whose worker died.
CONDUIT_Q_BROKER = env.str("CONDUIT_Q_BROKER", default="orm")
if CONDUIT_Q_BROKER.startswith(("redis://", "rediss://", "unix://")):
    del Q_CLUSTER["orm"]
    Q_CLUSTER["redis"] = CONDUIT_Q_BROKER
elif CONDUIT_Q_BROKER != "orm":
    raise ImproperlyConfigured("CONDUIT_Q_BROKER is orm or a redis:// URL")
# A reply SENDING longer than this (its worker died or hung) is parked in
# SEND_STATUS_UNKNOWN by the sweeper. Longer than the task timeout above.
CONDUIT_SEND_LEASE_SECONDS = env.int("CONDUIT_SEND_LEASE_SECONDS", default=120)
# Seconds a transport waits for the provider before the send is ambiguous.
# Live transports are refused unless this is on and the source's owner enabled live sending.
CONDUIT_LIVE_SEND = env.str("CONDUIT_LIVE_SEND", default="off").lower() == "on"
CONDUIT_TRANSPORT_TIMEOUT_SECONDS = env.float("CONDUIT_TRANSPORT_TIMEOUT_SECONDS", default=10.0)

# Reconciliation (docs/concepts/reconciliation.md#leases). A scan holds a lease per page
# call; the page timeout must end a call well within the lease.
CONDUIT_RECONCILE_LEASE_SECONDS = env.int("CONDUIT_RECONCILE_LEASE_SECONDS", default=60)
CONDUIT_RECONCILE_PAGE_TIMEOUT_SECONDS = env.float("CONDUIT_RECONCILE_PAGE_TIMEOUT_SECONDS", default=30.0)
CONDUIT_RECONCILE_PAGE_SIZE = env.int("CONDUIT_RECONCILE_PAGE_SIZE", default=1000)
CONDUIT_RECONCILE_INTERVAL_SECONDS = env.int("CONDUIT_RECONCILE_INTERVAL_SECONDS", default=3600)
CONDUIT_RECONCILE_POLL_LIMIT = env.int("CONDUIT_RECONCILE_POLL_LIMIT", default=20)
# The per-scan limits (docs/concepts/reconciliation.md#limits), raised within bounds for a source
# with a longer history (unset: the defaults, 1,000 pages, 10,000 staged items, 32 MiB staged;
# reconcile/staging.py checks the bounds).
CONDUIT_RECONCILE_MAX_PAGES = env.int("CONDUIT_RECONCILE_MAX_PAGES", default=None)
CONDUIT_RECONCILE_MAX_STAGED_ITEMS = env.int("CONDUIT_RECONCILE_MAX_STAGED_ITEMS", default=None)
CONDUIT_RECONCILE_MAX_STAGED_BYTES = env.int("CONDUIT_RECONCILE_MAX_STAGED_BYTES", default=None)
# The Graph API version Meta sources are registered against (pinned: Meta changes shapes by version).
CONDUIT_GRAPH_API_VERSION = env.str("CONDUIT_GRAPH_API_VERSION", default="v26.0")
if not re.fullmatch(r"v[0-9]{1,3}\.[0-9]{1,2}", CONDUIT_GRAPH_API_VERSION):
    raise ImproperlyConfigured("CONDUIT_GRAPH_API_VERSION is a Graph version like v26.0")
if CONDUIT_RECONCILE_PAGE_TIMEOUT_SECONDS >= CONDUIT_RECONCILE_LEASE_SECONDS:
    raise ImproperlyConfigured(
        "CONDUIT_RECONCILE_PAGE_TIMEOUT_SECONDS must be shorter than CONDUIT_RECONCILE_LEASE_SECONDS"
    )
# Connecting accounts from the back office (docs/platforms/connect.md): the platform apps the
# Connect buttons log in through. Their secrets are variables declared for credentials, named by
# the login (CONDUIT_SOURCE_META_APP_SECRET, CONDUIT_SOURCE_INSTAGRAM_APP_SECRET); these are not secret.
CONDUIT_META_APP_ID = env.str("CONDUIT_META_APP_ID", default="")
# Business Login for Instagram's "Instagram app ID" (the app dashboard, Instagram > API setup
# with Instagram login); the Meta app's id unless set.
CONDUIT_INSTAGRAM_APP_ID = env.str("CONDUIT_INSTAGRAM_APP_ID", default="") or CONDUIT_META_APP_ID
# Facebook Login for Business: the configuration (token type, assets, permissions) it asks for.
CONDUIT_META_LOGIN_CONFIG_ID = env.str("CONDUIT_META_LOGIN_CONFIG_ID", default="")
# A loopback URL of the Graph simulator standing in for every login host (the demo, the tests);
# anything but http:// on this host is refused at start (conduit/checks.py).
CONDUIT_CONNECT_SIMULATOR_URL = env.str("CONDUIT_CONNECT_SIMULATOR_URL", default="")
# The ranges of these settings (interval, poll limit, page size, per-scan limits) are one table,
# conduit/checks.py's SETTING_RANGES; its system check refuses a value outside them at start.

# The replay-decision engine (docs/concepts/replay-decisions.md): the role named in next.role, and the
# evidence model that answers destination_outcome@1 (unset: none loaded, every
# question abstains and the rules alone decide). Known model: http-semantics.
CONDUIT_DECISION_ROLE = env.str("CONDUIT_DECISION_ROLE", default="operator")
CONDUIT_EVIDENCE_MODEL = env.str("CONDUIT_EVIDENCE_MODEL", default="") or None

# Webhook bodies above this size are refused with 413 before any parsing.
CONDUIT_WEBHOOK_MAX_BYTES = env("CONDUIT_WEBHOOK_MAX_BYTES")
# on: webhook bodies that reach one process while its commit is in flight share the next commit
# (conduit/groupcommit.py); off, the default: each body commits alone, on its own thread's
# connection, while the process's other bodies run theirs (docs/benchmarks.md#group-commit).
_group_commit = env.str("CONDUIT_GROUP_COMMIT", default="off").strip().lower()
if _group_commit not in ("on", "off"):
    raise ImproperlyConfigured(f"CONDUIT_GROUP_COMMIT is on or off, not {_group_commit!r}")
CONDUIT_GROUP_COMMIT = _group_commit == "on"
# The Meta endpoint's (/webhooks/meta/<app id>/): by default the largest body Meta's documented
# bounds allow, 1,000 updates of at most an 8,000-character comment each sent escaped (about
# 50 MiB; conduit.providers.meta.webhook.MAX_BODY_BYTES says how it is derived), because a body
# Meta sends and Conduit refuses is retried for 36 hours and may get the app unsubscribed. An
# operator who knows the accounts' comments are shorter may lower it: each worker holds one body.
CONDUIT_META_WEBHOOK_MAX_BYTES = env.int("CONDUIT_META_WEBHOOK_MAX_BYTES", default=META_MAX_BODY_BYTES)
# Refused here as well as by the system check (conduit/checks.py): gunicorn runs no checks.
if _refusal := range_refusal("CONDUIT_META_WEBHOOK_MAX_BYTES", CONDUIT_META_WEBHOOK_MAX_BYTES):
    raise ImproperlyConfigured(_refusal)
# Seconds a provider is told to wait when the store is unavailable (503).
CONDUIT_RETRY_AFTER_SECONDS = env("CONDUIT_RETRY_AFTER_SECONDS")

# text (the default) or json: one JSON object per line for a log collector.
CONDUIT_LOG_FORMAT = env.str("CONDUIT_LOG_FORMAT", default="text").lower()
if CONDUIT_LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured("CONDUIT_LOG_FORMAT is text or json")

# Error reports: set, sentry-sdk reports the web's and the worker's errors, every event
# scrubbed by the data boundary (conduit/observability.py). Unset, nothing is sent anywhere.
SENTRY_DSN = env.str("SENTRY_DSN", default="")
if SENTRY_DSN:
    from conduit.observability import sentry_init

    sentry_init(dsn=SENTRY_DSN, environment=env.str("SENTRY_ENVIRONMENT", default="production"))
    # django-q2 calls its error reporters inside a failing task's except block.
    Q_CLUSTER["error_reporter"] = {"conduit_sentry": {}}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"boundary": {"()": "conduit.logging.BoundaryFilter"}},
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        # One JSON object per line (python-json-logger); extra fields judged by the boundary too.
        "json": {
            "()": "conduit.logging.JsonLineFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": CONDUIT_LOG_FORMAT,
            "filters": ["boundary"],
        }
    },
    "root": {"handlers": ["console"], "level": env("CONDUIT_LOG_LEVEL")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # django-q2 adds a handler of its own (without the filter) unless it finds one. Its
        # per-task lines are noise beside Conduit's own events: WARNING unless asked.
        "django-q": {
            "handlers": ["console"],
            "level": env.str("CONDUIT_Q_LOG_LEVEL", default="WARNING"),
            "propagate": False,
        },
        # runserver's line per request (static files included): only failures unless asked.
        "django.server": {"level": env.str("CONDUIT_SERVER_LOG_LEVEL", default="WARNING")},
    },
}

# Every variable the settings above read (and the one the worker's metrics use): the server's own.
CONDUIT_SERVER_VARIABLES = frozenset(env.read | {"PROMETHEUS_MULTIPROC_DIR", "DJANGO_SETTINGS_MODULE"})
