"""What a review decision answers, shared by every kind of reviewed item.

A decision either goes through (``ReviewOutcome``, with what a revocation reached) or is refused
with the conditions it did not meet (``ReviewRefused``), and nothing was written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reviewconsole.errors import ValidationFailure
from reviewconsole.tenancy import may_access

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from experience.core.models import ReviewedItem

NO_SUCH_CASE = "no case with this id"

NO_SUCH_SKILL = "no skill with this id"

NO_SUCH_LESSON = "no lesson with this id"

_UNKNOWN = {"case": NO_SUCH_CASE, "skill": NO_SUCH_SKILL, "lesson": NO_SUCH_LESSON}


class ReviewRefused(Exception):
    """A review operation with unmet conditions; nothing was written."""

    def __init__(self, item_id: str, status: str, unmet: Sequence[str]) -> None:
        super().__init__(f"{item_id} cannot be changed: " + ", ".join(unmet))
        self.item_id = item_id
        self.status = status
        self.unmet = list(unmet)


@dataclass(frozen=True)
class Impact:
    skills: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    # Lessons that revoking a case leaves without a usable supporting case.
    lessons: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        # ``lessons`` appears only when a revocation reaches any, so the shape callers of
        # cases, skills and documents already read stays as it was.
        shape: dict[str, Any] = {"skills": list(self.skills), "runs": list(self.runs)}
        if self.lessons:
            shape["lessons"] = list(self.lessons)
        return shape


@dataclass(frozen=True)
class ReviewOutcome:
    id: str
    status: str
    impact: Impact = field(default_factory=Impact)

    def as_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "id": self.id,
            "status": self.status,
            "unmet": [],
            "impact": self.impact.as_json(),
        }


def require_item_tenant(actor: User, item: ReviewedItem) -> None:
    """Items of a tenant the actor is not a member of do not exist for them: refused exactly as
    an unknown id is (``selectors.case_get`` and its kin), so no answer tells what exists in
    another tenant."""
    if not may_access(actor, item.tenant):
        unknown = _UNKNOWN[item._meta.model_name or ""]
        raise ValidationFailure("id", f"{unknown}: {item.id}")
