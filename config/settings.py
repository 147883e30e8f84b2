"""Settings, all from the environment (config.env helpers reject bad values).

Modes:
- development (default, nothing configured): SQLite in WAL mode and kombu's filesystem
  broker under var/, so `make run` works on a laptop with no server.
- production (DJANGO_MODE=production): DEBUG off, SECRET_KEY and ALLOWED_HOSTS required,
  secure cookies and HSTS; passes `manage.py check --deploy`.
DATABASE_URL=postgres://... and REDIS_URL=redis://... switch the store and the broker in
either mode.
"""
from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_choice, env_int, env_list, env_rate, env_str

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("HWPLANNER_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

MODE = env_choice("DJANGO_MODE", "development", ("development", "production"))
PRODUCTION = MODE == "production"
DEBUG = env_bool("DJANGO_DEBUG", default=not PRODUCTION)
if PRODUCTION and DEBUG:
    raise ImproperlyConfigured("DJANGO_DEBUG must be off when DJANGO_MODE=production")


# Keys anyone can read, refused in production: the Dockerfile's build-time key until 2026-11
# (public in the repository's history; the image build now makes a throw-away random one), and
# the keys of Django's startproject template, which begin with "django-insecure-".
PUBLISHED_SECRET_KEYS = frozenset({"build-only-collectstatic-key-not-used-at-run-time-0123456789"})
INSECURE_SECRET_KEY_PREFIX = "django-insecure-"


def _development_secret_key() -> str:
    # A per-checkout random key, kept under var/ so sessions survive restarts. Mode 0600 from
    # the start (not the umask's 0644): the key signs sessions, other local users must not read it.
    path = VAR_DIR / "secret_key"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            with contextlib.suppress(PermissionError):  # a file made before 0600; not ours to change if not owned
                path.chmod(0o600)
    else:
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


if PRODUCTION:
    SECRET_KEY = env_str("DJANGO_SECRET_KEY", required=True)
    if len(SECRET_KEY) < 50:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be at least 50 characters")
    if SECRET_KEY in PUBLISHED_SECRET_KEYS or SECRET_KEY.startswith(INSECURE_SECRET_KEY_PREFIX):
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY is a published key (the Dockerfile's old build-only key or a 'django-insecure-' key); "
            'generate one: python -c "import secrets; print(secrets.token_urlsafe(50))"'
        )
    ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", [])
    if not ALLOWED_HOSTS:
        raise ImproperlyConfigured("DJANGO_ALLOWED_HOSTS must be set when DJANGO_MODE=production")
else:
    SECRET_KEY = env_str("DJANGO_SECRET_KEY") or _development_secret_key()
    ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])

CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "simple_history",
    "accounts",
    "hwcatalog",
    "planner",
    "jobs",
    "frontend",
    # Idempotency-Key on the API's create POSTs (idempotency/middleware.py).
    "idempotency",
    # Content-Security-Policy (django-csp; its checks catch settings in the old format).
    "csp",
]

MIDDLEWARE = [
    "config.middleware.RequestBodyLimitMiddleware",
    # A control character in the path or the query: 404 or 400 before any view or query sees it.
    "config.middleware.ControlCharacterMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # The Content-Security-Policy header on every response (CONTENT_SECURITY_POLICY below).
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A retried create POST with the same Idempotency-Key gets the first answer (after the session
    # and CSRF middleware: it authenticates the way the view will, to scope keys per user).
    "idempotency.middleware.IdempotencyMiddleware",
    # Records who changed a catalog row (DRF hands its authenticated user to the request).
    "simple_history.middleware.HistoryRequestMiddleware",
    # Last, so it sees a view's database errors first: 503 with Retry-After instead of a 500.
    "config.middleware.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

# --- Database -------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    try:
        DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0))}
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a database URL: {exc}") from None
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    if DATABASES["default"]["ENGINE"].endswith("postgresql"):
        # A database that is unreachable (not refusing) fails a connect in seconds, not after the TCP timeout: a
        # worker's timer (jobs/worker_steps.py) or a request is never held for minutes. A URL's own value wins.
        DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", env_int("DB_CONNECT_TIMEOUT_S", 5, minimum=1))
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": Path(env_str("SQLITE_PATH", str(VAR_DIR / "db.sqlite3"))),
            # WAL lets the web process read while the worker writes; IMMEDIATE avoids
            # "database is locked" upgrades from read to write transactions.
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
            "TEST": {"NAME": VAR_DIR / "test_db.sqlite3"},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("DJANGO_STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if PRODUCTION
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# Web UI sign-in (frontend/urls.py): writes from the UI need an account, as in the API.
LOGIN_URL = "frontend:login"
LOGIN_REDIRECT_URL = "frontend:home"
LOGOUT_REDIRECT_URL = "frontend:home"

# --- Upload limits --------------------------------------------------------------------
# A config.json is a few KB; 1 MB leaves room and refuses hostile bodies early.
MAX_CONFIG_UPLOAD_BYTES = env_int("MAX_CONFIG_UPLOAD_BYTES", 1_000_000, minimum=1_000)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DATA_UPLOAD_MAX_MEMORY_SIZE", 2_500_000, minimum=10_000)
FILE_UPLOAD_MAX_MEMORY_SIZE = DATA_UPLOAD_MAX_MEMORY_SIZE
# Any request body over this is refused with 413 before it is read.
MAX_REQUEST_BODY_BYTES = env_int("MAX_REQUEST_BODY_BYTES", 16_000_000, minimum=100_000)
# The shape of any JSON document a request carries (a body, a form's JSON field, an uploaded
# config.json; inputs/json_limits.py): 2 KB of "[" would otherwise nest 1,000 deep and overflow
# the stack. Real inputs nest 4 deep (an import's config.json inside its body) and hold ~60 keys.
JSON_MAX_DEPTH = env_int("JSON_MAX_DEPTH", 32, minimum=8, maximum=200)
JSON_MAX_KEYS = env_int("JSON_MAX_KEYS", 10_000, minimum=1_000)

# --- REST framework -------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Token first, so an anonymous write gets 401 with WWW-Authenticate: Token.
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["hwcatalog.permissions.ReadPublicWriteTokenOrStaff"],
    # Over a rate: 429 with Retry-After. The counters live in the "throttle" cache (CACHES below).
    "DEFAULT_THROTTLE_CLASSES": [
        "accounts.throttling.AnonymousRateThrottle",
        "accounts.throttling.TokenRateThrottle",
        "accounts.throttling.PlanCreateRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": env_rate("API_THROTTLE_ANON", "300/min"),  # per IP address, anonymous requests
        "token": env_rate("API_THROTTLE_TOKEN", "1200/min"),  # per API token (per user for a session)
        "plans": env_rate("API_THROTTLE_PLANS", "120/min"),  # POST /api/v1/plans/ per token, on top
        # The web UI's forms (not DRF views; accounts.throttling.rate_limited applies these):
        "ui-writes": env_rate("UI_THROTTLE_WRITES", "60/min"),  # plan and validate forms, per user
        "sign-in": env_rate("UI_THROTTLE_SIGN_IN", "10/min"),  # password attempts per IP (UI and admin)
        # API keys that do not authenticate (malformed, unknown, revoked), per IP, checked before any query:
        "bad-keys": env_rate("API_THROTTLE_BAD_KEYS", "20/min"),
    },
    # Proxies in front that append to X-Forwarded-For (1 behind one load balancer): the anonymous
    # rate counts per client address. 0 uses the peer address and ignores the header a client could forge.
    "NUM_PROXIES": env_int("API_NUM_PROXIES", 0, minimum=0),
    "DEFAULT_FILTER_BACKENDS": [
        "django_filters.rest_framework.DjangoFilterBackend",
        "rest_framework.filters.OrderingFilter",
        "hwcatalog.filters.SearchFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "hwcatalog.pagination.StandardPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "hwcatalog.schema.ApiAutoSchema",
    "EXCEPTION_HANDLER": "hwcatalog.exceptions.api_exception_handler",
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    # DRF's three, with JSON held to JSON_MAX_DEPTH and JSON_MAX_KEYS.
    "DEFAULT_PARSER_CLASSES": [
        "inputs.parsers.LimitedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "hwplanner API",
    "DESCRIPTION": "Which hardware should we serve this model on, and what will each token cost?",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # Served from our own static files: the docs page works with no network.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {"ChipKindEnum": "hwcatalog.models.Chip.Kind", "DtypeEnum": "planner.engine.units.DTYPES"},
}

# --- Idempotency keys -----------------------------------------------------------------
# How long a retry with the same Idempotency-Key gets the first answer, and after how long a
# request that never finished (a killed worker) no longer holds its key (gunicorn's timeout is 30 s).
IDEMPOTENCY_KEY_TTL_S = env_int("IDEMPOTENCY_KEY_TTL_S", 86_400, minimum=60)
IDEMPOTENCY_LOCK_S = env_int("IDEMPOTENCY_LOCK_S", 120, minimum=10)
# The Idempotency-Key header in the schema of each create operation, with no view edited.
SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"] = [
    "drf_spectacular.hooks.postprocess_schema_enums",  # drf-spectacular's default, kept
    "idempotency.schema.add_idempotency_key",
]

# --- Content-Security-Policy ----------------------------------------------------------
# Scripts, styles, fonts and images from our own origin only (the vendored Chart.js is a static
# file): no inline script or event handler runs, no eval, no other host. Templates keep data in
# json_script blocks (type="application/json": CSP governs executable scripts only). The admin
# and the Swagger UI (SpectacularSwaggerSplitView: its init script is a URL) fit in it too.
# data: images: the admin's and Swagger UI's stylesheets use a few SVG data URIs.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}

# --- Caches ---------------------------------------------------------------------------
# "throttle" holds the API rate-limit counters, which every web process (gunicorn workers, other
# machines) must share: Redis when there is one, else files under var/ (embedded mode, no server).
# On Redis its keys carry a prefix of their own: the database may be Celery's too.
REDIS_URL = env_str("REDIS_URL")  # also Celery's broker (below)
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "hwplanner-throttle",
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
    }
    if REDIS_URL
    else {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": VAR_DIR / "throttle-cache",
        "KEY_PREFIX": "hwplanner-throttle",
        "OPTIONS": {"MAX_ENTRIES": 2000},
    },
}

# --- Throttle fallback (accounts.throttling) -------------------------------------------
# When the throttle cache does not answer, each process counts in its own memory for this long
# before trying the cache again: rates still hold (per process), sign-in included.
THROTTLE_FALLBACK_S = env_int("THROTTLE_FALLBACK_S", 10, minimum=1, maximum=600)

# --- Celery ---------------------------------------------------------------------------
if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_RESULT_BACKEND = REDIS_URL
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT_S", 7200, minimum=60),
        "socket_connect_timeout": 3,  # a broker host that does not answer fails a publish in seconds
        # ... and one that accepts but hangs (a stopped redis-server) too; the worker's own reads
        # block at most 1 s (BRPOP), so this never cuts them short.
        "socket_timeout": env_int("CELERY_BROKER_SOCKET_TIMEOUT_S", 2, minimum=1, maximum=60),
    }
else:
    # kombu's filesystem transport: a broker that needs no server (embedded mode).
    _broker_dir = Path(env_str("HWPLANNER_BROKER_DIR", str(VAR_DIR / "broker")))
    for _sub in ("queue", "processed", "control"):
        (_broker_dir / _sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_URL = "filesystem://"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "control_folder": str(_broker_dir / "control"),
        "store_processed": False,
    }
    CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_DEFAULT_QUEUE = "cpu"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Time limits on purpose: a trial that runs past them is stopped and its run marked failed.
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT_S", 900, minimum=10)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT_S", 960, minimum=20)
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = TIME_ZONE
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Results live in our own tables (ValidationRun, WorkerHeartbeat), never in the result backend;
# ignoring them also keeps a publish from touching Redis twice.
CELERY_TASK_IGNORE_RESULT = True
# A publish to a broker that is down gives up at once (refused) or after two tries of
# socket_timeout (hung, about 5 s); the run stays queued, the POST answers 202, and the recovery
# sweep sends it again (jobs.services.validation_runs_recover).
VALIDATION_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0.2, "interval_step": 0.3, "interval_max": 0.5}

# --- Validation run recovery (jobs.services, jobs.schedules) ----------------------------
# A queued run whose message was not taken this long after it was sent is sent again (then
# after 2x, 4x, ...): a broker restarted without persistence loses its queues. With the sweep
# every VALIDATION_SWEEP_EVERY_S, a lost message is sent again at most 30 + 20 = 50 s after it
# was sent; a run that merely waits behind a long trial gains a duplicate (a no-op) at 30, 90,
# 210 s, ...
VALIDATION_RESEND_AFTER_S = env_int("VALIDATION_RESEND_AFTER_S", 30, minimum=1)
VALIDATION_SWEEP_EVERY_S = env_int("VALIDATION_SWEEP_EVERY_S", 20, minimum=1, maximum=3600)
# The health check (GET /api/v1/health/jobs/) and the UI warn when the recovery sweep or every
# worker's heartbeat is older than this: a beat that died, or no worker to run what it sends.
JOBS_STALE_AFTER_S = env_int("JOBS_STALE_AFTER_S", 150, minimum=30)

# --- Plan searches (planner.services.plan_create, planner/tasks.py) ---------------------
# A plan of at most this many candidate configurations is searched inside the request (about
# 0.1 s); a bigger one is stored queued and searched by a worker (the API answers 202).
PLAN_INLINE_MAX_CANDIDATES = env_int("PLAN_INLINE_MAX_CANDIDATES", 100_000, minimum=0)
# A worker's search stops here and the plan is marked failed (5 M candidates take ~4 s).
PLAN_TASK_SOFT_TIME_LIMIT = env_int("PLAN_TASK_SOFT_TIME_LIMIT_S", 300, minimum=10)
PLAN_TASK_TIME_LIMIT = env_int("PLAN_TASK_TIME_LIMIT_S", 330, minimum=20)
# A plan's status is one enum in the schema (validation runs have their own).
SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"] = {**SPECTACULAR_SETTINGS["ENUM_NAME_OVERRIDES"], "PlanStatusEnum": "planner.models.Plan.Status"}

# --- Fleet plans (planner.fleet_services, planner/tasks.py run_fleet; docs/fleet.md) ----------
# A fleet of at most this many configurations over all its classes is planned inside the request; a
# bigger one is stored queued and planned by a worker (the API answers 202).
FLEET_INLINE_MAX_CANDIDATES = env_int("FLEET_INLINE_MAX_CANDIDATES", 100_000, minimum=0)
# Candidates each class keeps for the program (besides each chip's cheapest and smallest).
FLEET_KEEP_PER_CLASS = env_int("FLEET_KEEP_PER_CLASS", 60, minimum=1)
# HiGHS stops one solve here and keeps its best fleet (the result says its MIP gap).
FLEET_SOLVE_TIME_LIMIT_S = env_int("FLEET_SOLVE_TIME_LIMIT_S", 20, minimum=1)
# A plan runs up to 3 + limits + chips solves; the candidate search and all of them together keep within this, inside a
# request (under gunicorn's 30 s timeout; a fleet the solver finds no answer for in that time goes to a worker)
# and on a worker (under its task's soft time limit, PLAN_TASK_SOFT_TIME_LIMIT_S): the fleet gets at most half, and what no
# time is left for is skipped and named in the results (skipped_analyses).
FLEET_INLINE_TIME_BUDGET_S = env_int("FLEET_INLINE_TIME_BUDGET_S", 20, minimum=1)
FLEET_TASK_TIME_BUDGET_S = env_int("FLEET_TASK_TIME_BUDGET_S", 240, minimum=1)

# --- Serving simulations (planner.simulation_services, planner/tasks.py; docs/simulation.md) ----
# One simulation draws or uploads at most this many requests (10,000 take ~0.3 s on one core).
SIMULATION_MAX_REQUESTS = env_int("SIMULATION_MAX_REQUESTS", 20_000, minimum=1)
# An uploaded trace (CSV or JSONL) is at most this many bytes (~25 bytes a request).
SIMULATION_MAX_TRACE_BYTES = env_int("SIMULATION_MAX_TRACE_BYTES", 2_000_000, minimum=1_000)
# A simulation of at most this many requests (a plan's stage: top_n x requests) runs inside the
# request; a bigger one is stored queued and run by workers (a plan's: one task per candidate).
SIMULATION_INLINE_MAX_REQUESTS = env_int("SIMULATION_INLINE_MAX_REQUESTS", 5_000, minimum=0)
# ...and of at most this many prompt + output tokens in all (steps grow with tokens when batches are
# small); one simulation may carry at most SIMULATION_MAX_TOKENS.
SIMULATION_INLINE_MAX_TOKENS = env_int("SIMULATION_INLINE_MAX_TOKENS", 5_000_000, minimum=0)
# ...and runs there within this many forwards in all (its replicas, pools, swept rates, a plan's candidates): past them it
# goes to the workers. The steps, not the tokens, set the time (2-8 us a step on one core, so about 1-4 s at most): a
# block-diffusion answer of one token runs steps_per_block forwards, a token budget of 1 a forward per prompt token. The
# benchmark's 10,000 requests take 28,201 forwards. At most the scheduler's own cap on one schedule, 50 M.
SIMULATION_INLINE_MAX_STEPS = env_int("SIMULATION_INLINE_MAX_STEPS", 500_000, minimum=0, maximum=50_000_000)
SIMULATION_MAX_TOKENS = env_int("SIMULATION_MAX_TOKENS", 100_000_000, minimum=1)
# A plan simulates at most top_n x requests in all.
SIMULATION_MAX_PLAN_REQUESTS = env_int("SIMULATION_MAX_PLAN_REQUESTS", 400_000, minimum=1)
SIMULATION_TASK_SOFT_TIME_LIMIT = env_int("SIMULATION_TASK_SOFT_TIME_LIMIT_S", 300, minimum=10)
SIMULATION_TASK_TIME_LIMIT = env_int("SIMULATION_TASK_TIME_LIMIT_S", 330, minimum=20)

# --- Production hardening -------------------------------------------------------------
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
    # Opt-in: only a proxy that sets X-Forwarded-Proto itself (dropping a client's) may be trusted
    # with it; with gunicorn reached directly (docker-compose) any client could claim HTTPS.
    if env_bool("DJANGO_TRUST_X_FORWARDED_PROTO", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_CONTENT_TYPE_NOSNIFF = True
    X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR"))},
}
