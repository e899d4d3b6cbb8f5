"""The HTTP API for agents under /api/v1/ (SPEC §4.4)."""

from __future__ import annotations

from ninja import NinjaAPI

api = NinjaAPI(title="Experience review console API", version="1", urls_namespace="api-v1")
