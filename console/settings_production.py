"""Production settings: everything secret or host-specific comes from the environment."""

from __future__ import annotations

import os
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from console.settings import *  # noqa: F403
from console.settings import DEV_SECRET_KEY, MIDDLEWARE, STATIC_ROOT
from reviewconsole.client_address import proxy_networks

DEBUG = False

# Refused, not warned: a weak key signs sessions and, until AUDIT_HMAC_KEY is its own, the chain.
# The bar is Django's own (check --deploy, security.W009): 50 characters, 5 distinct, not a
# generated insecure key.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if (
    SECRET_KEY == DEV_SECRET_KEY
    or len(SECRET_KEY) < 50
    or len(set(SECRET_KEY)) < 5
    or SECRET_KEY.startswith("django-insecure-")
):
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set to a long random value in production "
        "(at least 50 characters, 5 of them distinct)"
    )

# The audit chain's head key, explicit and apart from the secret key: rotating the secret key
# must not break the chain, and one leaked key must not sign both.
AUDIT_HMAC_KEY = os.environ.get("AUDIT_HMAC_KEY", "")
if len(AUDIT_HMAC_KEY) < 32 or AUDIT_HMAC_KEY == SECRET_KEY:
    raise ImproperlyConfigured(
        "AUDIT_HMAC_KEY must be set in production to a random value of at least 32 characters, "
        "not the secret key (e.g. python -c 'import secrets; print(secrets.token_hex(32))')"
    )

# The anchor file is the only witness of the chain outside the database: without it, a cut
# through both audit tables, or a backup cut at its end, goes unnoticed. Its folder must exist.
AUDIT_ANCHOR_FILE = os.environ.get("AUDIT_ANCHOR_FILE", "")
if not AUDIT_ANCHOR_FILE or not Path(AUDIT_ANCHOR_FILE).parent.is_dir():
    raise ImproperlyConfigured(
        "AUDIT_ANCHOR_FILE must name a file in an existing folder in production, ideally "
        "append-only on other storage (see docs/operations.md, Audit verification)"
    )

# Sign-on trusts what the provider's discovery document and keys say: fetched over TLS only.
if SSO_ISSUER and not SSO_ISSUER.startswith("https://"):  # noqa: F405
    raise ImproperlyConfigured("CONSOLE_SSO_ISSUER must be an https:// address in production")

ALLOWED_HOSTS = [
    h.strip() for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "").split(",") if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

SECURE_SSL_REDIRECT = os.environ.get("DJANGO_SECURE_SSL_REDIRECT", "1") == "1"
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = 31_536_000
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SESSION_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SECURE = True
X_FRAME_OPTIONS = "DENY"

# /metrics: only with CONSOLE_METRICS_TOKEN, or from the networks CONSOLE_METRICS_ALLOW names.
METRICS_ALLOWED_NETWORKS = [
    value.strip()
    for value in os.environ.get("CONSOLE_METRICS_ALLOW", "").split(",")
    if value.strip()
]

# The load balancers (addresses or networks) whose last X-Forwarded-For entry names the client
# for login throttling (reviewconsole/client_address.py); the recipe's HAProxy is 127.0.0.1.
TRUSTED_PROXIES = [
    value.strip()
    for value in os.environ.get("CONSOLE_TRUSTED_PROXIES", "").split(",")
    if value.strip()
]
proxy_networks(TRUSTED_PROXIES, name="CONSOLE_TRUSTED_PROXIES")  # refuses a malformed one

# Static files (stylesheet, scripts, the API docs page's files) served by each instance itself,
# with WhiteNoise: no other web server is needed behind the load balancer. ``collectstatic``
# writes them to STATIC_ROOT under names carrying a hash of their content (and gzip copies), so
# they are cached for good by browsers and a new release's files never mix with an old page.
# Run ``collectstatic`` before starting the instances: a page naming a file it did not collect
# fails. WhiteNoise answers static paths just after the security middleware (HTTPS redirect,
# nosniff); pages keep every other middleware, the Content-Security-Policy included.
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT") or STATIC_ROOT)
MIDDLEWARE = [
    *MIDDLEWARE[: MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1],
    "whitenoise.middleware.WhiteNoiseMiddleware",
    *MIDDLEWARE[MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1 :],
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
