from django.urls import path, register_converter

from experience.pages import items as views
from experience.pages import lessons as lesson_views
from experience.pages import outcomes as outcome_views
from experience.pages import runs as run_views


class DigestConverter:
    """The hex part of a ``case:``/``skill:`` id; the prefix is implied by the URL."""

    regex = "[0-9a-f]{64}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(DigestConverter, "digest")

app_name = "experience"

urlpatterns = [
    path("queue/", views.queue, name="queue"),
    path("cases/<digest:digest>/", views.case_detail, name="case-detail"),
    path("cases/<digest:digest>/checklist/", views.case_checklist, name="case-checklist"),
    path("cases/<digest:digest>/check/", views.case_check, name="case-check"),
    path("cases/<digest:digest>/review/", views.case_review, name="case-review"),
    path("cases/<digest:digest>/revoke/", views.case_revoke_view, name="case-revoke"),
    path("skills/<digest:digest>/", views.skill_detail, name="skill-detail"),
    path("skills/<digest:digest>/checklist/", views.skill_checklist, name="skill-checklist"),
    path("skills/<digest:digest>/review/", views.skill_review, name="skill-review"),
    path("skills/<digest:digest>/revoke/", views.skill_revoke_view, name="skill-revoke"),
    path("runs/", run_views.run_list, name="run-list"),
    # Before run-detail, whose ``path`` converter would take ``…/outcome/`` as part of the id.
    path("runs/<path:run_id>/outcome/", outcome_views.run_outcome, name="run-outcome"),
    path("runs/<path:run_id>/follow-up/", run_views.run_follow_up_mark, name="run-follow-up"),
    path("runs/<path:run_id>/", run_views.run_detail, name="run-detail"),
]

# Lessons (experience.pages.lessons).
urlpatterns += [
    path("lessons/", lesson_views.lesson_list, name="lesson-list"),
    path("lessons/conflicts/", lesson_views.conflict_list, name="lesson-conflicts"),
    path("lessons/conflicts/<int:pk>/", lesson_views.conflict_detail, name="lesson-conflict"),
    path("lessons/<digest:digest>/", lesson_views.lesson_detail, name="lesson-detail"),
    path("lessons/<digest:digest>/review/", lesson_views.lesson_review, name="lesson-review"),
    path(
        "lessons/<digest:digest>/checklist/",
        lesson_views.lesson_checklist,
        name="lesson-checklist",
    ),
    path("lessons/<digest:digest>/merge/", lesson_views.lesson_merge, name="lesson-merge"),
    path("lessons/<digest:digest>/restore/", lesson_views.lesson_restore, name="lesson-restore"),
]
