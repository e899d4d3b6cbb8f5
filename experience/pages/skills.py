"""The skill page: its recipe or prompt, the cases it cites, its runs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.utils.translation import gettext_lazy as _

from experience.cases.models import Skill
from experience.cases.selectors import (
    cited_case,
    gate_fields,
    skill_approval_checklist,
    skill_cases,
)
from experience.core import domain
from experience.core.availability import case_availability, case_usable, skill_availability
from experience.lessons.selectors import item_confidences
from experience.pages.availability import availability_view
from experience.pages.checklists import PROMPT_SKILL_CONDITIONS, SKILL_CONDITIONS
from experience.pages.items import ItemPage, item_views
from experience.pages.selectors import runs_of_skill, skill_get_visible
from experience.review.changes import skill_changes_request, skill_resubmit
from experience.review.decisions import skill_approve, skill_reject
from experience.review.revocation import skill_revoke
from reviewconsole import clock
from reviewconsole.links import item_url
from reviewconsole.permissions import VIEW_SKILL
from reviewconsole.views import Condition, HtmxHttpRequest


def _constraints(schema: Mapping[str, Any]) -> list[str]:
    """A declared property's bounds as the schema states them (``maxLength: 500``, ``enum``)."""
    shown = []
    for key in ("minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems"):
        if key in schema:
            shown.append(f"{key}: {schema[key]}")
    if "enum" in schema:
        shown.append("enum: " + ", ".join(str(v) for v in schema["enum"]))
    return shown


def _properties(shape: Mapping[str, Any]) -> list[dict[str, Any]]:
    required = set(shape.get("required") or [])
    rows = []
    for name, schema in (shape.get("properties") or {}).items():
        kind = str(schema.get("type"))
        items = schema.get("items") or {}
        rows.append(
            {
                "name": name,
                "type": f"array of {items.get('type')}" if kind == "array" else kind,
                "required": name in required,
                "constraints": _constraints(schema) + _constraints(items),
                "description": str(schema.get("description") or ""),
            }
        )
    return rows


def prompt_view(skill: Skill) -> dict[str, Any] | None:
    """What the skill page shows of a prompt-form skill: its prompt, tools, budget, and its
    declared inputs and output one property a row."""
    if not skill.prompt:
        return None
    body = skill.prompt
    return {
        "instructions": body.get("instructions", ""),
        "tools": list(body.get("tools") or []),
        "max_calls": body.get("max_calls"),
        "inputs": _properties(body.get("inputs") or {}),
        "output": _properties(body.get("output") or {}),
    }


def _confidence(skill: Skill) -> Any:
    """The computed confidence of the skill, with its inputs (as the lesson page shows)."""
    return item_confidences([], [skill.id], clock.now()).get(skill.id)


def _skill_context(
    request: HtmxHttpRequest,
    skill: Skill,
    *,
    reason: str = "",
    review_errors: Sequence[Condition] = (),
) -> dict[str, Any]:
    now = clock.now()
    cases = skill_cases(skill)
    cited = [cited_case(case) for case in cases]
    availability = skill_availability(gate_fields(skill), cited, now)
    titles = {case.id: case.title for case in cases}
    return {
        **SKILL_PAGE.panel(request, skill, reason=reason, review_errors=review_errors),
        "skill": skill,
        "prompt": prompt_view(skill),
        "availability": availability_view(skill.status, availability, titles),
        "confidence": _confidence(skill),
        "cases": [
            {
                "case": case,
                "url": item_url(case.id),
                "usable": case_usable(cited_case(case), now),
                "availability": availability_view(
                    case.status, case_availability(gate_fields(case), now)
                ),
                "same_scope": domain.same_scope(case.scope, skill.scope),
            }
            for case in cases
        ],
        "distinct_incidents": domain.distinct_incidents(cited, now),
        "runs": [{"run": run, "url": run.get_absolute_url()} for run in runs_of_skill(skill)],
    }


SKILL_PAGE = ItemPage(
    kind="skill",
    view_permission=VIEW_SKILL,
    get_visible=skill_get_visible,
    template="experience/skill_detail.html",
    main_partial="skill-main",
    context=_skill_context,
    unmet=skill_approval_checklist,
    # A prompt-form skill's checklist adds its tools.
    universe=lambda skill: PROMPT_SKILL_CONDITIONS if skill.prompt else SKILL_CONDITIONS,
    approve=skill_approve,
    reject=skill_reject,
    revoke=skill_revoke,
    decided=_("The skill “%(title)s” is now %(status)s."),
    request_changes=skill_changes_request,
    resubmit=skill_resubmit,
)
SKILL_VIEWS = item_views(SKILL_PAGE)
