"""The delta of the retrieval index and of the vector index: what a change appends, what a
reader reads on top of the merged array and matrix, and what a merge folds.

A scope's additions and removals append to its delta and a background merge folds them in; every
read in between must rank exactly as the definition (every gated item's text through
``rank_items``, what a full rebuild gives: tests/experience/index/test_retrieval_index.py holds
a rebuild to it), after additions, revocations, supersessions and merges in any order, and a
removal must leave the answer at the next read. A reader that keeps the merged array and matrix
(PostgreSQL for the array; the vector branch on both) fetches only the delta's new rows after an
addition, and many additions queue one merge.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django_tasks import task_backends
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experience.cases.models import Case
from experience.core.models import Status
from experience.index import postings
from experience.index.models import IndexDelta, IndexScope
from semantic import branch, packing
from semantic.models import PackedMatrix, ScopeVectors, VectorDelta
from semantic.tasks import scope_vectors_task, vectors_merge_task
from tests.experience.conftest import SCOPE
from tests.experience.index.test_retrieval_index import (
    OTHER,
    WORDS,
    Rollback,
    Spec,
    indexed,
    make_case,
    reference,
    status_published,
)

pytestmark = pytest.mark.django_db

QUEUED_ONLY = {"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}
CONCEPTS = "tests.semantic.fakes.concepts"
QUERIES = ("优惠券 门店", "打印机 断电", "代金券 用不了 coupon")


@pytest.fixture
def queued_only(settings: Any) -> Any:
    """Tasks are queued and never run (merges wait, as for a busy worker)."""
    settings.TASKS = QUEUED_ONLY
    backend = task_backends["default"]
    backend.clear()  # type: ignore[attr-defined]
    return backend


@pytest.fixture(autouse=True)
def small_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Merges after three changes, so a few steps cross the threshold."""
    monkeypatch.setattr(postings, "DELTA_MIN", 3)
    monkeypatch.setattr(packing, "DELTA_MIN", 3)


def _scope_id(scope: dict[str, str]) -> int:
    return IndexScope.objects.values_list("pk", flat=True).get(store=scope["store"])


def assert_same() -> None:
    for query in QUERIES:
        for scope in (SCOPE, OTHER):
            assert indexed(query, scope) == reference(query, scope), (query, scope)
            if IndexScope.objects.filter(store=scope["store"]).exists():
                assert postings.scope_read(scope, query) is not postings.STALE


def _status_set(case: Case, status: str) -> None:
    case.refresh_from_db()
    if case.status == Status.APPROVED:
        case.status = status
        case.save(update_fields=["status"])
        status_published(case)


step = st.one_of(
    st.tuples(st.just("add"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=5), st.integers(0, 1)),
    st.tuples(st.just("revoke"), st.integers(0, 30), st.just(0)),
    st.tuples(st.just("supersede"), st.integers(0, 30), st.just(0)),
    st.tuples(st.just("merge"), st.integers(0, 1), st.just(0)),
)  # fmt: skip


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=1, max_size=12))
def test_base_and_delta_rank_as_the_definition_through_changes_and_merges(
    operator: User, steps: list[tuple[str, Any, int]]
) -> None:
    try:
        with transaction.atomic():
            # Both scopes exist and are packed before the steps: what follows goes to the delta.
            made = [
                make_case(0, Spec("优惠券 无法使用", 0, "now", True), operator),
                make_case(1, Spec("打印机 断电", 1, "now", True), operator),
            ]
            for n, (action, value, scope) in enumerate(steps, start=2):
                if action == "add":
                    made.append(make_case(n, Spec(" ".join(value), scope, "now", True), operator))
                elif action in ("revoke", "supersede"):
                    status = Status.REVOKED if action == "revoke" else Status.SUPERSEDED
                    _status_set(made[value % len(made)], status)
                else:
                    store = (SCOPE, OTHER)[value]["store"]
                    for chosen in IndexScope.objects.filter(store=store).values_list(
                        "pk", flat=True
                    ):
                        postings.delta_merged(chosen)
                assert_same()
            for chosen in IndexScope.objects.values_list("pk", flat=True):
                postings.delta_merged(chosen)
            assert not IndexDelta.objects.exists()
            assert_same()
            raise Rollback
    except Rollback:
        pass


def test_a_removal_leaves_the_answer_at_the_next_read_before_any_merge(
    operator: User, queued_only: Any
) -> None:
    first = make_case(1, Spec("优惠券 无法使用", 0, "now", True), operator)
    second = make_case(2, Spec("优惠券 门店", 0, "now", True), operator)
    third = make_case(3, Spec("优惠券", 0, "now", True), operator)
    assert set(indexed("优惠券", SCOPE)) == {first.id, second.id, third.id}
    _status_set(second, Status.REVOKED)
    _status_set(third, Status.SUPERSEDED)
    assert IndexDelta.objects.count() == 4  # two additions, two removals: nothing merged
    assert indexed("优惠券", SCOPE) == reference("优惠券", SCOPE) == [first.id]


def test_many_additions_to_one_scope_queue_one_merge(operator: User, queued_only: Any) -> None:
    make_case(0, Spec("优惠券", 0, "now", True), operator)  # the scope, packed
    for n in range(1, 10):
        make_case(n, Spec(f"优惠券 门店 {n}", 0, "now", True), operator)
    queued = [r for r in queued_only.results if r.task.name == postings.index_merge_task.name]
    assert len(queued) == 1
    assert IndexDelta.objects.count() == 9
    # The one merge folds every change appended until it runs; running it again writes nothing.
    scope_id = _scope_id(SCOPE)
    assert postings.delta_merged(scope_id) == 9
    assert postings.delta_merged(scope_id) == 0
    assert indexed("优惠券 门店", SCOPE) == reference("优惠券 门店", SCOPE)


def test_a_reader_fetches_only_the_delta_after_one_addition(
    operator: User, queued_only: Any
) -> None:
    for n in range(20):
        make_case(n, Spec(f"优惠券 无法使用 门店 {n}", 0, "now", True), operator)
    postings.delta_merged(_scope_id(SCOPE))
    postings.scope_read(SCOPE, "优惠券")
    assert postings.FETCHED.bytes == 20 * postings.ENTRY_DTYPE.itemsize  # the merged array
    added = make_case(99, Spec("优惠券 打印机", 0, "now", True), operator)
    read = postings.scope_read(SCOPE, "优惠券")
    assert read is not postings.STALE and postings.FETCHED.delta_rows == 1
    if connection.vendor == "postgresql":
        # The array is kept by its row version: of the scope, one record travels.
        assert postings.FETCHED.bytes == postings.ENTRY_DTYPE.itemsize
    else:
        # SQLite reads the file in process, the array with the record: nothing is kept.
        assert postings.FETCHED.bytes == 21 * postings.ENTRY_DTYPE.itemsize
    assert added.id in indexed("优惠券", SCOPE)


# --- vectors ---------------------------------------------------------------------------------


def _packed_whole(scope_id: int) -> branch.Packed:
    """The scope's matrix as a whole packing writes it now (the definition of the merged one)."""
    ScopeVectors.objects.filter(space=postings.VECTOR_SPACE, scope=scope_id).update(dirty=True)
    PackedMatrix.objects.filter(space=postings.VECTOR_SPACE, scope=scope_id).update(
        model="another-model"
    )
    packing.scope_packed(postings.VECTOR_SPACE, scope_id)
    branch.caches_cleared()
    found = branch.packed(postings.VECTOR_SPACE, scope_id)
    assert found is not None
    return found


def test_vectors_of_new_entries_append_to_the_delta_and_merge_into_the_whole_packing(
    settings: Any, operator: User, queued_only: Any
) -> None:
    settings.SEMANTIC_EMBEDDER = CONCEPTS
    branch.caches_cleared()
    made = [make_case(n, Spec(f"优惠券 门店 {n}", 0, "now", True), operator) for n in range(4)]
    scope_id = _scope_id(SCOPE)
    packing.scope_packed(postings.VECTOR_SPACE, scope_id)  # not packed yet: packed whole
    version = ScopeVectors.objects.get(scope=scope_id).version
    assert branch.packed(postings.VECTOR_SPACE, scope_id) is not None  # a reader holds it

    made.append(make_case(10, Spec("打印机 断电", 0, "now", True), operator))
    assert packing.scope_packed(postings.VECTOR_SPACE, scope_id) == 1
    row = ScopeVectors.objects.get(scope=scope_id)
    assert row.version == version and VectorDelta.objects.count() == 1  # matrix not rewritten
    held = branch.packed(postings.VECTOR_SPACE, scope_id)
    assert held is not None
    assert branch.FETCHED.delta_rows == 1
    assert branch.FETCHED.bytes == 4 * int(row.dim) + 4 * 4 + 8  # one row's vector: no matrix
    _status_set(made[0], Status.REVOKED)  # its vector stays until the merge; the gate refuses it

    made += [make_case(n, Spec(f"小程序 {n}", 0, "now", True), operator) for n in (11, 12)]
    scope_vectors_task.call(postings.VECTOR_SPACE, scope_id)  # the worker's run
    made.append(make_case(13, Spec("小程序 门店", 0, "now", True), operator))
    scope_vectors_task.call(postings.VECTOR_SPACE, scope_id)
    queued = [r for r in queued_only.results if r.task.name == vectors_merge_task.name]
    assert len(queued) == 1  # the delta reached three rows, then four: one merge queued
    assert vectors_merge_task.call(postings.VECTOR_SPACE, scope_id) == 4
    assert vectors_merge_task.call(postings.VECTOR_SPACE, scope_id) == 0
    assert not VectorDelta.objects.exists()
    merged = branch.packed(postings.VECTOR_SPACE, scope_id)
    assert merged is not None and merged.version == version + 1
    whole = _packed_whole(scope_id)
    assert merged.keys.tolist() == whole.keys.tolist()
    assert np.array_equal(merged.matrix, whole.matrix)
    assert merged.languages is not None and whole.languages is not None
    assert np.array_equal(merged.languages, whole.languages)
    assert merged.item_null is not None and whole.item_null is not None
    assert np.allclose(merged.item_null, whole.item_null)
    assert len(held.keys) == 5  # the four packed whole and the one appended
