"""The revocation impact is answered from indexes, in a fixed number of queries."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.db.models import QuerySet

from experience.cases.models import SkillCase
from experience.lessons.models import LessonCase
from experience.review import impact as impacts
from experience.runs.models import Reference, RunCitation

pytestmark = pytest.mark.django_db

sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="EXPLAIN QUERY PLAN is SQLite's"
)


def plan(queryset: QuerySet[Any]) -> str:
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


@sqlite_only
def test_runs_referencing_uses_the_item_index() -> None:
    query = (
        Reference.objects.filter(item_id__in=["case:a", "skill:b"])
        .order_by()
        .values_list("run_id", flat=True)
        .distinct()
    )
    text = plan(query)
    assert "reference_item_run" in text and "SCAN" not in text.replace("SCAN CONSTANT", "")


@sqlite_only
def test_context_blocks_referencing_use_the_partial_block_index() -> None:
    query = (
        Reference.objects.filter(item_id__in=["case:a", "skill:b"], in_block=True)
        .order_by()
        .values_list("run_id", flat=True)
        .distinct()
    )
    text = plan(query)
    assert "reference_item_block" in text and "SCAN" not in text.replace("SCAN CONSTANT", "")


@sqlite_only
def test_skills_citing_uses_the_case_index() -> None:
    query = SkillCase.objects.filter(case_id="case:a").order_by().values_list("skill_id", flat=True)
    assert "skill_case_by_case" in plan(query)


@sqlite_only
def test_lessons_citing_uses_the_case_index() -> None:
    query = (
        LessonCase.objects.filter(case_id="case:a", relation="supports")
        .order_by()
        .values_list("lesson_id", flat=True)
    )
    text = plan(query)
    assert "SEARCH" in text and "(case_id=?" in text and "SCAN" not in text


@sqlite_only
def test_runs_citing_a_document_uses_the_document_index() -> None:
    query = (
        RunCitation.objects.filter(document_id="doc:rule-b@1")
        .order_by()
        .values_list("run_id_text", flat=True)
    )
    assert "run_citation_document" in plan(query)


def test_impact_costs_four_queries_however_many_references(
    django_assert_num_queries: Any,
) -> None:
    Reference.objects.bulk_create(
        Reference(
            run_id=f"run-{i % 40}",
            item_id="case:hot",
            item_type="case",
            read_at="2026-10-01T00:00:00Z",
        )
        for i in range(400)
    )
    # The case's tenant, skills citing the case, lessons left without support, runs of that
    # tenant that read any of them, and of those the ones whose context block carried one (the
    # conflicts of the lessons left without support only when there are such lessons).
    with django_assert_num_queries(5):
        impact = impacts.revocation_impact("case:hot")
    assert impact.runs == sorted(f"run-{i}" for i in range(40))
