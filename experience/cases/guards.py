"""Approval conditions that other apps contribute without experience importing them.

An app registers a guard at start-up (its ``AppConfig.ready``); a guard returns the unmet
condition names it finds for a case. Approval and the console's live checklist both ask here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from experience.cases.models import Case

CaseApprovalGuard = Callable[["Case"], list[str]]
case_approval_guards: list[CaseApprovalGuard] = []


def case_approval_guard_register(guard: CaseApprovalGuard) -> None:
    if guard not in case_approval_guards:
        case_approval_guards.append(guard)


def guard_unmet(case: Case, already: list[str]) -> list[str]:
    """The registered guards' unmet names for ``case`` that ``already`` does not list."""
    found: list[str] = []
    for guard in case_approval_guards:
        found += [name for name in guard(case) if name not in already and name not in found]
    return found
