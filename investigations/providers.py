"""Which provider a run uses: ``scripted`` (the default, no network) or ``live``.

The live provider's endpoint comes from settings, else the environment:
``CONSOLE_LLM_BASE_URL`` (an OpenAI-compatible ``…/v1``), ``CONSOLE_LLM_MODEL`` and
``CONSOLE_LLM_API_KEY`` (optional for local servers). One model call waits at most
``LLM_TIMEOUT_SECONDS`` (env ``CONSOLE_LLM_TIMEOUT``) and never past the run's time budget.
"""

from __future__ import annotations

import os

from django.conf import settings

from investigations.domain import Provider
from investigations.scripted import ScriptedProvider
from reviewconsole.errors import ValidationFailure

SCRIPTED = "scripted"
LIVE = "live"
PROVIDERS = (SCRIPTED, LIVE)
LIVE_NOT_CONFIGURED = (
    "the live provider needs CONSOLE_LLM_BASE_URL and CONSOLE_LLM_MODEL (an OpenAI-compatible "
    "chat-completions endpoint with tool calling)"
)


def _setting(name: str) -> str:
    return str(getattr(settings, name, None) or os.environ.get(name, "") or "").strip()


def live_configured() -> bool:
    return bool(_setting("CONSOLE_LLM_BASE_URL") and _setting("CONSOLE_LLM_MODEL"))


def provider_for(name: str) -> Provider:
    if name == SCRIPTED:
        return ScriptedProvider()
    if name == LIVE:
        if not live_configured():
            raise ValidationFailure("provider", LIVE_NOT_CONFIGURED)
        from investigations.live import LiveProvider

        return LiveProvider(
            base_url=_setting("CONSOLE_LLM_BASE_URL"),
            model=_setting("CONSOLE_LLM_MODEL"),
            api_key=_setting("CONSOLE_LLM_API_KEY") or None,
            timeout=float(settings.LLM_TIMEOUT_SECONDS),
        )
    raise ValidationFailure("provider", "must be one of " + ", ".join(PROVIDERS))
