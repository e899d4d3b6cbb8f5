from collections.abc import Callable

from django.http import HttpResponse
from django.urls import path, register_converter

from experience.pages import conflicts as conflict_views
from experience.pages import imports as import_views
from experience.pages import lessons as lesson_views
from experience.pages import outcomes as outcome_views
from experience.pages import queue as queue_views
from experience.pages import runs as run_views
from experience.pages.cases import CASE_VIEWS, case_check
from experience.pages.items import ItemViews
from experience.pages.lessons import LESSON_VIEWS
from experience.pages.skills import SKILL_VIEWS


class DigestConverter:
    """The hex part of a ``case:``/``skill:`` id; the prefix is implied by the URL."""

    regex = "[0-9a-f]{64}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(DigestConverter, "digest")


def revoke_of(views: ItemViews) -> Callable[..., HttpResponse]:
    """The revoke page of a kind that has one (cases and skills; a lesson revokes on its page)."""
    assert views.revoke is not None
    return views.revoke


app_name = "experience"

urlpatterns = [
    path("queue/", queue_views.queue, name="queue"),
    path("import/", import_views.import_page, name="import"),
    path("cases/<digest:digest>/", CASE_VIEWS.detail, name="case-detail"),
    path("cases/<digest:digest>/checklist/", CASE_VIEWS.checklist, name="case-checklist"),
    path("cases/<digest:digest>/check/", case_check, name="case-check"),
    path("cases/<digest:digest>/review/", CASE_VIEWS.review, name="case-review"),
    path("cases/<digest:digest>/revoke/", revoke_of(CASE_VIEWS), name="case-revoke"),
    path("skills/<digest:digest>/", SKILL_VIEWS.detail, name="skill-detail"),
    path("skills/<digest:digest>/checklist/", SKILL_VIEWS.checklist, name="skill-checklist"),
    path("skills/<digest:digest>/review/", SKILL_VIEWS.review, name="skill-review"),
    path("skills/<digest:digest>/revoke/", revoke_of(SKILL_VIEWS), name="skill-revoke"),
    path("runs/", run_views.run_list, name="run-list"),
    # Before run-detail, whose ``path`` converter would take ``…/outcome/`` as part of the id.
    path("runs/<path:run_id>/outcome/", outcome_views.run_outcome, name="run-outcome"),
    path("runs/<path:run_id>/follow-up/", run_views.run_follow_up_mark, name="run-follow-up"),
    path("runs/<path:run_id>/", run_views.run_detail, name="run-detail"),
]

# Lessons (experience.pages.lessons, experience.pages.conflicts).
urlpatterns += [
    path("lessons/", lesson_views.lesson_list, name="lesson-list"),
    path("lessons/conflicts/", conflict_views.conflict_list, name="lesson-conflicts"),
    path("lessons/conflicts/<int:pk>/", conflict_views.conflict_detail, name="lesson-conflict"),
    path("lessons/<digest:digest>/", LESSON_VIEWS.detail, name="lesson-detail"),
    # Approve, reject, and revoke from the lesson page's revoke panel (``decision=revoke``).
    path("lessons/<digest:digest>/review/", LESSON_VIEWS.review, name="lesson-review"),
    path("lessons/<digest:digest>/checklist/", LESSON_VIEWS.checklist, name="lesson-checklist"),
    path("lessons/<digest:digest>/merge/", lesson_views.lesson_merge, name="lesson-merge"),
    path("lessons/<digest:digest>/restore/", lesson_views.lesson_restore, name="lesson-restore"),
]
