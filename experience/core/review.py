"""What a review decision answers, shared by every kind of reviewed item.

A decision either goes through (``ReviewOutcome``, with what a revocation reached) or is refused
with the conditions it did not meet (``ReviewRefused``), and nothing was written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    """What a revocation reaches, in the one shape every surface shows (the preview, the
    confirmation, the stored list, the mail, ``review --preview`` and its ``--json``)."""

    skills: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    # Lessons that revoking a case leaves without a usable supporting case.
    lessons: list[str] = field(default_factory=list)
    # Open lesson conflicts one of whose sides the revocation revokes or leaves unavailable.
    conflicts: list[int] = field(default_factory=list)
    # Runs whose context block carried the item or a skill or lesson it reaches (a subset of
    # ``runs``: those whose prompt held its text).
    context_blocks: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        # ``skills`` and ``runs`` are always there; the others appear only when a revocation
        # reaches any, so the shape callers of cases, skills and documents already read stays
        # as it was.
        shape: dict[str, Any] = {"skills": list(self.skills), "runs": list(self.runs)}
        for name in OPTIONAL_PARTS:
            if getattr(self, name):
                shape[name] = list(getattr(self, name))
        return shape

    @classmethod
    def from_json(cls, shape: Mapping[str, Any]) -> Impact:
        """The impact an ``as_json`` answer (or an audit event's copy of one) describes."""
        return cls(
            skills=list(shape.get("skills", [])),
            runs=list(shape.get("runs", [])),
            **{name: list(shape.get(name, [])) for name in OPTIONAL_PARTS},
        )

    @property
    def reached(self) -> bool:
        return any(getattr(self, name) for name in ("skills", "runs", *OPTIONAL_PARTS))


OPTIONAL_PARTS = ("lessons", "conflicts", "context_blocks")


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
