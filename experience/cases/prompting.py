"""What a prompt-form skill needs from the app above: its tools and its runner.

A prompt skill runs only through the investigation runner, which lives above experience
(``investigations``). That app registers at start-up (its ``AppConfig.ready``) the tools a
prompt skill may declare (``prompt_tools_register``: every registered investigation tool,
each saying whether it is read-only for a prompt skill) and the runner
(``prompt_runner_install``). Imports and approvals check declared tools against the first;
``run_skill`` hands a prompt skill to the second. Without a runner installed a prompt skill
falls back (``runner_unavailable``); it is never run any other way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from experience.core.prompts import PromptSpec, PromptTool

if TYPE_CHECKING:
    from django.contrib.auth.models import User

_tools: dict[str, PromptTool] = {}


def prompt_tools_register(tools: Iterable[PromptTool]) -> None:
    for tool in tools:
        _tools[tool.name] = tool


def prompt_tools() -> dict[str, PromptTool]:
    """The registered investigation tools, as a prompt skill's declaration sees them."""
    return dict(_tools)


@dataclass(frozen=True)
class PromptRun:
    """One prompt skill run, as the executor hands it to the runner. Scope, times and facts
    come from the caller; the skill's prompt decides only what the sub-agent is told, which of
    the declared tools it is offered and how many calls it may make."""

    skill_id: str
    spec: PromptSpec
    inputs: Mapping[str, object]
    scope: Mapping[str, str]
    occurred_at: datetime | None
    known_at: datetime | None
    facts: Mapping[str, object]
    run_id: str
    actor: User
    # The instant memory is read as of, and the run's clock.
    now: datetime
    moment: Callable[[], datetime]
    at: datetime | None
    provider: str
    # A provider object the caller already holds (an investigation's own model): used instead
    # of building one from ``provider``.
    provider_instance: object | None
    # Asked before every tool call: why the skill may no longer be used, or None.
    unavailable: Callable[[], str | None]


@dataclass
class PromptRunOutcome:
    """What the runner answers: the skill run's status and reason (executor codes), the
    runner's steps with every tool's full result, the verified (or refused) answer."""

    status: str
    reason: str
    provider: str
    trace: list[dict[str, Any]] = field(default_factory=list)
    answer: dict[str, Any] | None = None
    verification: dict[str, Any] = field(default_factory=dict)
    output: dict[str, Any] | None = None
    cited_documents: set[str] = field(default_factory=set)


class PromptRunner(Protocol):
    def run(self, run: PromptRun) -> PromptRunOutcome: ...

    def provider_checked(self, provider: object) -> str:
        """The provider's name, or a ``ValidationFailure`` naming ``provider``."""
        ...


_runner: list[PromptRunner] = []


def prompt_runner_install(runner: PromptRunner) -> None:
    _runner[:] = [runner]


def prompt_runner() -> PromptRunner | None:
    return _runner[0] if _runner else None
