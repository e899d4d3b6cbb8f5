"""API tokens of agent service accounts. Only a SHA-256 hash of each token is stored."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A bearer token acting as ``user``; the token text itself is shown once and never stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    # The public part of the token, used to find the row before the hash is compared.
    prefix = models.CharField(max_length=16, unique=True)
    token_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "API token"
        permissions = [("revoke_apitoken", "Can revoke API tokens")]

    def __str__(self) -> str:
        label = f" ({self.name})" if self.name else ""
        return f"{self.prefix}{label}"


class RateCount(models.Model):
    """Requests of one rate-limited key (an agent account) in the current fixed window.

    One row per key, counted by one atomic statement (``agentapi.limits.count_hit``) that every
    web instance runs against the same database, so the limit holds across instances.
    """

    key = models.CharField(max_length=100, unique=True)
    period_seconds = models.PositiveIntegerField()
    period_index = models.BigIntegerField()
    hits = models.PositiveIntegerField()

    def __str__(self) -> str:
        return f"{self.key}: {self.hits} in window {self.period_index}"


class LiveRun(models.Model):
    """A live investigation an MCP server is answering within a call (stdio or Streamable
    HTTP): it counts, with the account's queued and running ones, against
    ``CONSOLE_API_LIVE_INVESTIGATIONS`` on every instance (``agentapi.limits.live_run_held``).

    Written when the call starts, in the transaction that counted the account's live runs under
    its lock, and deleted when the call ends. A row whose process died with it stops counting
    once no run could still be going (``agentapi.limits.live_run_stale_after``).
    """

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    started_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["actor", "started_at"], name="live_run_actor")]

    def __str__(self) -> str:
        return f"live run of {self.actor_id} since {self.started_at:%Y-%m-%d %H:%M:%S}"
