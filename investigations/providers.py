"""Which provider a run uses: ``scripted`` (the default, no network) or ``live``.

The live provider's endpoint comes from settings, else the environment:
``CONSOLE_LLM_BASE_URL`` (an OpenAI-compatible ``…/v1``), ``CONSOLE_LLM_MODEL`` and
``CONSOLE_LLM_API_KEY`` (optional for local servers). One model call waits at most
``LLM_TIMEOUT_SECONDS`` (env ``CONSOLE_LLM_TIMEOUT``) and never past the run's time budget.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from django.conf import settings

from investigations.domain import Provider
from investigations.scripted import ScriptedProvider
from reviewconsole.errors import ValidationFailure

if TYPE_CHECKING:
    from investigations.live import LiveProvider

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


PROVIDER_UNKNOWN = "must be one of " + ", ".join(PROVIDERS)


def provider_checked(provider: object) -> str:
    """``provider`` when it names a provider this deployment can run (the live one only once it
    is configured); otherwise a ``ValidationFailure`` on ``provider``. One check for an
    investigation and a prompt skill's run alike."""
    if provider not in PROVIDERS:
        raise ValidationFailure("provider", PROVIDER_UNKNOWN)
    if provider == LIVE and not live_configured():
        raise ValidationFailure("provider", LIVE_NOT_CONFIGURED)
    return str(provider)


# Who writes an after-action review's lesson (``AAR_REVIEW_AGENT``, env
# ``CONSOLE_AAR_REVIEW_AGENT``): ``trace``, the deterministic draft, or ``live``, the live model
# configured above as the review agent (its draft is checked against the trace).
REVIEW_BY_TRACE = "trace"
REVIEW_BY_LIVE = "live"
REVIEW_AGENT_NOT_CONFIGURED = "the review agent is set to live but no live model is configured"


def review_agent_wanted() -> bool:
    return _setting("AAR_REVIEW_AGENT") == REVIEW_BY_LIVE


def review_agent() -> LiveProvider:
    """The live model as the after-action review agent; refused while none is configured."""
    if not live_configured():
        raise ValidationFailure("AAR_REVIEW_AGENT", REVIEW_AGENT_NOT_CONFIGURED)
    from investigations.live import LiveProvider

    return LiveProvider(
        base_url=_setting("CONSOLE_LLM_BASE_URL"),
        model=_setting("CONSOLE_LLM_MODEL"),
        api_key=_setting("CONSOLE_LLM_API_KEY") or None,
        timeout=float(settings.LLM_TIMEOUT_SECONDS),
    )


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
