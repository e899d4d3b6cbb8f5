"""Compiled statements answer exactly what their queryset answers, for any values."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db.models import Exists, OuterRef
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experience.cases.models import Case, SkillCase
from experience.core.models import Status
from reviewconsole import statements
from reviewconsole.statements import DATETIME, Param, Statement
from tests.experience.conftest import NOW, SCOPE

pytestmark = pytest.mark.django_db

STORES = ("store-a", "store-b", "store-c")
DAY = timedelta(days=1)


def _cases(stores: list[str], offsets: list[int], user: User) -> list[Case]:
    made = []
    for n, (store, offset) in enumerate(zip(stores, offsets, strict=True)):
        made.append(
            Case.objects.create(
                id=f"case:{n:064x}",
                **{**SCOPE, "store": store},
                title=f"case {n}",
                valid_from=NOW + offset * DAY,
                valid_to=NOW + 400 * DAY,
                content_hash=f"{n:064x}",
                content={"n": n},
                submitted_by=user,
                submitted_via="import",
                submitted_at=NOW - 50 * DAY,
                status=Status.APPROVED if n % 3 else Status.CANDIDATE,
                incident=f"INC-{n}",
                search_text="",
            )
        )
    return made


def _queryset(store: str, now: Any, ids: list[str] | None = None) -> Any:
    cases = Case.objects.filter(store=store, valid_from__lte=now, status=Status.APPROVED)
    if ids is not None:
        cases = cases.filter(id__in=ids)
    # A correlated subquery and a literal of the queryset's own, kept as they are.
    cited = SkillCase.objects.filter(case_id=OuterRef("id"))
    return cases.annotate(cited=Exists(cited)).order_by().values_list("id", "title", "cited")


BY_STORE = Statement(_queryset, [Param("store"), Param("now", DATETIME)])
AMONG = Statement(_queryset, [Param("store"), Param("now", DATETIME), Param("ids", many=True)])


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    rows=st.lists(st.tuples(st.sampled_from(STORES), st.integers(-5, 5)), max_size=12),
    store=st.sampled_from(STORES),
    at=st.integers(-6, 6),
    picked=st.lists(st.integers(0, 15), max_size=10),
)
def test_a_compiled_statement_answers_what_its_queryset_answers(
    operator: User, rows: list[tuple[str, int]], store: str, at: int, picked: list[int]
) -> None:
    Case.objects.all().delete()
    made = _cases([s for s, _ in rows], [o for _, o in rows], operator)
    now = NOW + at * DAY
    # Ids that exist and ids that do not, repeated at times.
    ids = [made[i].id if i < len(made) else f"case:missing-{i}" for i in picked]

    assert sorted(BY_STORE.rows(store=store, now=now)) == sorted(_queryset(store, now))
    if ids:
        expected = sorted(_queryset(store, now, ids))
        assert sorted(AMONG.rows(store=store, now=now, ids=ids)) == expected
    else:
        assert AMONG.rows(store=store, now=now, ids=ids) == []


def test_a_long_list_is_read_in_chunks_with_nothing_lost_or_repeated(
    operator: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _cases(["store-a"] * 12, [-1] * 12, operator)
    monkeypatch.setattr(statements, "MAX_LIST", 4)
    ids = [case.id for case in made] + [made[0].id]
    got = AMONG.rows(store="store-a", now=NOW, ids=ids)
    expected = list(_queryset("store-a", NOW, ids))
    assert len(got) == len(expected) == 8  # the approved ones: n % 3 != 0
    assert sorted(got) == sorted(expected)


def test_a_value_the_queryset_computes_with_is_refused() -> None:
    def hides_its_value(store: str) -> Any:
        return Case.objects.filter(store=store.upper())

    with pytest.raises(ValueError, match="store"):
        Statement(hides_its_value, [Param("store")]).rows(store="store-a")


def test_two_list_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="one list"):
        Statement(_queryset, [Param("store", many=True), Param("ids", many=True)])


PREPARED = Statement(
    _queryset, [Param("store"), Param("now", DATETIME), Param("ids", many=True)], prepared=True
)


def test_a_prepared_statement_answers_what_its_queryset_answers_and_is_counted(
    operator: User, django_assert_num_queries: Any
) -> None:
    """Prepared on PostgreSQL (the server binds the values and plans the statement once per
    connection), Django's cursor elsewhere: the same rows, run after run, and each run is a
    query Django counts like any other."""
    from django.db import connection

    made = _cases(["store-a", "store-a", "store-b", "store-a"], [-1, -1, -1, 2], operator)
    ids = [case.id for case in made]
    expected = sorted(_queryset("store-a", NOW, ids))
    assert expected
    for _ in range(3):
        with django_assert_num_queries(1):
            assert sorted(PREPARED.rows(store="store-a", now=NOW, ids=ids)) == expected
    assert PREPARED.rows(store="store-c", now=NOW, ids=ids) == []
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_prepared_statements")
            assert cursor.fetchone()[0] >= 1
