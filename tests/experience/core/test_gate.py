"""The gate's query expressions keep exactly the rows the pure predicates admit, on each
database: stored rows filtered by ``experience.core.gate`` against ``experience.core.availability``
over the same fields, at instants on and around every boundary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experience.cases.models import Case, Skill, SkillCase
from experience.core import availability, domain, gate
from experience.core.availability import CitedCase, GateFields
from experience.lessons.models import Lesson, LessonCase, LessonRelation

BASE = datetime(2026, 10, 1, 4, 0, tzinfo=UTC)
SHANGHAI = timezone(timedelta(hours=8))
# Whole hours around BASE, so valid_from, valid_to, approved_at and now often coincide; some
# written in another zone (the gate compares instants).
INSTANTS = st.builds(
    lambda hours, zone: (BASE + timedelta(hours=hours)).astimezone(zone),
    st.integers(min_value=-2, max_value=2),
    st.sampled_from([UTC, SHANGHAI]),
)
STATUSES = st.sampled_from(["candidate", "approved", "rejected", "revoked", "superseded"])
SCOPE = {"tenant": "t1", "brand": "b", "store": "s1", "campaign": "c", "deployment": "d"}
SCOPES = st.builds(
    lambda tenant, store: {**SCOPE, "tenant": tenant, "store": store},
    st.sampled_from(["t1", "t2"]),
    st.sampled_from(["s1", "s2"]),
)


@st.composite
def gate_fields(draw: st.DrawFn) -> GateFields:
    valid_from = draw(INSTANTS)
    return GateFields(
        status=draw(STATUSES),
        scope=draw(SCOPES),
        valid_from=valid_from,
        # Rows keep valid_to after valid_from (a check constraint).
        valid_to=valid_from + timedelta(hours=draw(st.integers(min_value=1, max_value=3))),
        approved_at=draw(st.none() | INSTANTS),
    )


def _common(n: int, kind: str, fields: GateFields, user: User) -> dict[str, Any]:
    return {
        "id": f"{kind}:{n:064x}",
        **fields.scope,
        "title": f"{kind} {n}",
        "valid_from": fields.valid_from,
        "valid_to": fields.valid_to,
        "content_hash": f"{n:064x}",
        "content": {},
        "submitted_by": user,
        "submitted_via": "import",
        "submitted_at": BASE - timedelta(days=1),
        "status": fields.status,
        "approved_at": fields.approved_at,
    }


def stored(rows: list[GateFields], user: User) -> tuple[list[Case], list[Lesson]]:
    """Each row as a case and as a lesson; one skill citing every case, every lesson citing
    case 0."""
    cases = Case.objects.bulk_create(
        Case(**_common(n, "case", f, user), incident=f"INC-{n}", search_text="")
        for n, f in enumerate(rows)
    )
    lessons = Lesson.objects.bulk_create(
        Lesson(
            **_common(n, "lesson", f, user),
            lesson_type="success_pattern",
            scene_description="",
            precondition="",
            conclusion="",
            search_text="",
        )
        for n, f in enumerate(rows)
    )
    # Bulk writes send no post_save: nothing is indexed or notified.
    (skill,) = Skill.objects.bulk_create(
        [Skill(**_common(0, "skill", rows[0], user), when="", recipe=[])]
    )
    SkillCase.objects.bulk_create(
        SkillCase(skill=skill, case=case, position=n) for n, case in enumerate(cases)
    )
    LessonCase.objects.bulk_create(
        LessonCase(lesson=lesson, case=cases[0], relation=LessonRelation.SUPPORTS, position=0)
        for lesson in lessons
    )
    return cases, lessons


def cited(case_id: str, fields: GateFields) -> CitedCase:
    return CitedCase(case_id, fields.status, fields.scope, "", fields.valid_from, fields.valid_to)


class Rollback(Exception):
    pass


@pytest.mark.django_db
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=st.lists(gate_fields(), min_size=1, max_size=6),
    now=INSTANTS,
    scope=SCOPES,
)
def test_the_query_expressions_keep_what_the_predicates_admit(
    operator: User, rows: list[GateFields], now: datetime, scope: dict[str, str]
) -> None:
    try:
        with transaction.atomic():
            cases, lessons = stored(rows, operator)
            case_ids = [c.id for c in cases]
            lesson_ids = [lesson.id for lesson in lessons]

            def kept(query: Any, column: str = "id") -> set[str]:
                return set(query.values_list(column, flat=True))

            available = {
                i
                for i, f in zip(case_ids, rows, strict=True)
                if availability.item_available(f, now)
            }
            usable = {
                i
                for i, f in zip(case_ids, rows, strict=True)
                if availability.case_usable(cited(i, f), now)
            }
            admitted = {
                i for i, f in zip(case_ids, rows, strict=True) if domain.admits(f, scope, now)
            }
            assert kept(Case.objects.filter(gate.available_q(now))) == available
            assert kept(Case.objects.filter(gate.usable_case_q(now))) == usable
            assert kept(Case.objects.filter(gate.admitted_q(scope, now))) == admitted
            # Through a link, at a lookup path: skills' cited cases, lessons' own gate.
            assert (
                kept(SkillCase.objects.filter(gate.usable_case_q(now, "case__")), "case_id")
                == usable
            )
            lessons_admitted = {
                i for i, f in zip(lesson_ids, rows, strict=True) if domain.admits(f, scope, now)
            }
            assert (
                kept(
                    LessonCase.objects.filter(gate.admitted_q(scope, now, "lesson__")), "lesson_id"
                )
                == lessons_admitted
            )
            raise Rollback
    except Rollback:
        pass


def test_every_comparison_has_a_lookup() -> None:
    for comparison in availability.Comparison:
        term = availability.Term("valid_from", comparison, availability.OUTSIDE_VALIDITY)
        assert gate.term_q(term, BASE).children  # raises KeyError for a comparison left out
