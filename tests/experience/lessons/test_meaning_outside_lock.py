"""A worker's task compares an item in meaning without running the embedding model inside its
write transaction (issue 39, item 15): on SQLite that transaction holds the one write lock, and
the model (loaded on first use, seconds on a busy machine) would keep every command and request
waiting. The case's and the lesson's texts are embedded before the task's transaction opens."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.models import User
from django.db import connection

from experience.cases.models import Case
from tests.experience.lessons import test_merges_by_meaning as merges
from tests.experience.lessons.test_merges_by_meaning import (
    STORE_LIMITED_EN,
    STORE_LIMITED_ZH,
    bilingual_lexicon,
    zh_case,
)
from tests.semantic import fakes

# The fixtures of the merges' tests, used here as they are.
shaped = merges.shaped
approved_lesson = merges.approved_lesson

RECORDING = "tests.experience.lessons.test_meaning_outside_lock.recording"


class Recording(fakes.Shaped):
    """The shaped fake, noting how many transactions deep each passage was embedded."""

    depths: list[int] = []  # reset by each test

    def passages(self, texts: Any) -> Any:
        Recording.depths.append(len(connection.savepoint_ids))
        return super().passages(texts)


recording = Recording


def embedded_at_callers_depth(run: Callable[[], object]) -> list[int]:
    """The depths at which ``run`` embedded, relative to its caller's (0: outside its own
    transaction), with the process's passage cache emptied first."""
    from experience.index import vectors

    vectors._passages.clear()
    Recording.depths = []
    outside = len(connection.savepoint_ids)
    run()
    return [depth - outside for depth in Recording.depths]


def test_a_case_index_task_embeds_before_its_write_transaction(
    shaped: Any,
    approved_case: Callable[..., Case],
    submit_case: Callable[..., Case],
    operator: User,
) -> None:
    from curation.tasks import case_index_task

    shaped.SEMANTIC_EMBEDDER = RECORDING
    bilingual_lexicon(operator)
    approved_case(**zh_case("INC-STORE", "门店限定优惠券不能用", "本店不在门店限定名单里。"))
    case = submit_case(zh_case("INC-OTHER", "门店限定券不能用", "本店不在门店名单里。"))

    depths = embedded_at_callers_depth(lambda: case_index_task.call(case.id))

    assert depths, "the task compared nothing in meaning"
    assert set(depths) == {0}


def test_a_lesson_index_task_embeds_before_its_write_transaction(
    approved_lesson: Callable[..., Any], shaped: Any, operator: User
) -> None:
    from curation.tasks import lesson_index_task

    shaped.SEMANTIC_EMBEDDER = RECORDING
    bilingual_lexicon(operator)
    approved_lesson(STORE_LIMITED_ZH)
    candidate = approved_lesson(STORE_LIMITED_EN, approve=False)

    depths = embedded_at_callers_depth(lambda: lesson_index_task.call(candidate.id))

    assert depths, "the task compared nothing in meaning"
    assert set(depths) == {0}
