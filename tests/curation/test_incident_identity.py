"""A case's canonical incident is the same in Python and in SQL, whatever merges reviewers made.

The Python form follows the merges to the end; the SQL form looks one merge up inside the query.
They agree because ``incident_merge`` stores every merge resolved to its root, which this test
checks too.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from curation.incidents import incident_merge
from curation.models import IncidentMerge
from curation.selectors.incidents import (
    canonical_incident_expression,
    case_incident,
    incident_support,
    merge_scope_of,
    merges_by_scope,
)
from experience.cases.models import Case, Skill, SkillCase
from experience.cases.selectors import with_canonical_incident
from reviewconsole.errors import ValidationFailure
from tests.experience.conftest import NOW, SCOPE

BRANDS = st.sampled_from([SCOPE["brand"], "second-brand"])
INCIDENTS = st.sampled_from(["INC-1", "INC-2", "INC-3", "INC-4"])


def reviewed(n: int, kind: str, brand: str, user: User) -> dict[str, object]:
    return dict(
        id=f"{kind}:{n:064x}",
        **{**SCOPE, "brand": brand},
        title=f"case {n}",
        valid_from=NOW - timedelta(days=1),
        valid_to=NOW + timedelta(days=1),
        content_hash=f"{n:064x}",
        content={},
        submitted_by=user,
        submitted_via="import",
        submitted_at=NOW,
        status="approved",
        approved_at=NOW,
    )


class Rollback(Exception):
    pass


@pytest.mark.django_db
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    merges=st.lists(st.tuples(BRANDS, INCIDENTS, INCIDENTS), max_size=5),
    cases=st.lists(st.tuples(BRANDS, INCIDENTS), min_size=1, max_size=6),
)
def test_the_python_and_sql_canonical_incidents_agree(
    reviewer: User,
    merges: list[tuple[str, str, str]],
    cases: list[tuple[str, str]],
) -> None:
    try:
        with transaction.atomic():
            for brand, alias, into in merges:
                with contextlib.suppress(ValidationFailure):  # already one incident
                    incident_merge(
                        tenant=SCOPE["tenant"],
                        brand=brand,
                        alias=alias,
                        into=into,
                        actor=reviewer,
                        reason="one incident",
                    )
            # Stored resolved: no merge's canonical id is itself merged away.
            for tenant, brand, canonical in IncidentMerge.objects.values_list(
                "tenant", "brand", "canonical"
            ):
                assert not IncidentMerge.objects.filter(
                    tenant=tenant, brand=brand, alias=canonical
                ).exists()

            # Bulk writes send no post_save: nothing is linked, indexed or notified.
            rows = Case.objects.bulk_create(
                Case(**reviewed(n, "case", brand, reviewer), incident=incident, search_text="")
                for n, (brand, incident) in enumerate(cases)
            )
            by_scope = merges_by_scope(merge_scope_of(case) for case in rows)
            in_python = {case.id: case_incident(case, by_scope) for case in rows}
            in_sql = dict(
                Case.objects.annotate(canonical=canonical_incident_expression()).values_list(
                    "id", "canonical"
                )
            )
            assert in_sql == in_python

            # The path experience reads it by: a link row's case, through the rule curation
            # installs at start-up.
            (skill,) = Skill.objects.bulk_create(
                [Skill(**reviewed(0, "skill", SCOPE["brand"], reviewer), when="", recipe=[])]
            )
            SkillCase.objects.bulk_create(
                SkillCase(skill=skill, case=case, position=n) for n, case in enumerate(rows)
            )
            links, incident = with_canonical_incident(SkillCase.objects.filter(skill=skill))
            assert dict(links.values_list("case_id", incident)) == in_python
            assert incident_support(rows).incident_ids == tuple(sorted(set(in_sql.values())))
            raise Rollback
    except Rollback:
        pass
