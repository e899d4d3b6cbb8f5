"""``load_demo``: the demo world on an empty database, idempotent, dated relative to now, and the
README's demo examples work as printed right after it."""

from __future__ import annotations

import json
import re
import shlex
from datetime import datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth.models import User
from django.core import mail
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from console.demo import demo_replay_report
from curation.models import NearDuplicate, ReReview, SkillProposal, Thread
from evaluation.models import ReplayReport
from experience.cases.models import Case, Skill
from experience.core.models import Status
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from experience.runs.models import Reference, RevocationImpact, Run
from investigations.models import Investigation
from reviewconsole.models import Event
from tests.diffmarks import marks
from tests.helpers import clock_frozen

pytestmark = pytest.mark.django_db

README = Path(settings.BASE_DIR) / "README.md"
NOW = datetime.fromisoformat("2027-02-10T09:30:00+08:00")
ITEM_ID = re.compile(r"\b(?:case|skill|lesson):[0-9a-f]{64}\b")
DEMO_RUN = re.compile(r"\bdemo-[a-z]+-[a-z0-9-]*\d\b")


def load(*args: str) -> dict[str, Any]:
    out = StringIO()
    call_command("load_demo", "--no-replay", "--json", *args, stdout=out)
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


def row_counts() -> dict[str, int]:
    return {model._meta.label: model._default_manager.count() for model in apps.get_models()}


def test_an_empty_database_gets_every_kind_of_demo_item() -> None:
    assert not Case.objects.exists() and not User.objects.exists()
    with clock_frozen(NOW):
        result = load()
    assert set(User.objects.values_list("username", flat=True)) >= {
        "rita",
        "ravi",
        "olivia",
        "ada",
        "agent-7",
    }
    statuses = list(Case.objects.values_list("status", flat=True))
    assert statuses.count(Status.APPROVED) >= 3 and statuses.count(Status.CANDIDATE) >= 2
    assert statuses.count(Status.REVOKED) == 1
    # Two recipe skills and one prompt-form skill (issue 27).
    approved_skills = Skill.objects.filter(status=Status.APPROVED)
    assert sorted(skill.form for skill in approved_skills) == ["prompt", "recipe", "recipe"]
    assert Lesson.objects.filter(status=Status.APPROVED).count() == 2
    assert LessonConflict.objects.filter(status=ConflictStatus.OPEN).count() == 1
    # A run read the case revoked later, and the revocation's stored impact names it.
    revoked = result["revoked"]
    assert Reference.objects.filter(item_id=revoked, run_id="demo-recall-1").exists()
    impact = RevocationImpact.objects.get(item_id=revoked)
    assert sorted(impact.runs) == ["demo-recall-1", "demo-skill-run-2"]
    assert impact.skills == [result["skills"][1]]  # the first skill stays available
    assert Run.objects.filter(run_id="demo-skill-run-1", status="needs_review").exists()
    assert Investigation.objects.filter(run_id="demo-investigation-1").exists()
    # Curation: a thread with a candidate built from it, a near-duplicate pair, a skill
    # proposal, a re-review entry; and the after-action-review drafts of the runs.
    assert Thread.objects.filter(thread_id=result["thread"]["thread"]).exists()
    # The thread's candidate and the approved store-list case; any other open link pairs an
    # after-action-review draft with a case it resembles (the prompt skill's run is drafted too).
    # The store manager's account pairs with the cases it retells (issue 39, item 8).
    links = NearDuplicate.objects.filter(status="open").select_related("case_a", "case_b")
    thread_case, recurrence = result["thread"]["case"], result["recurrence"]["case"]
    assert sum(thread_case in (link.case_a_id, link.case_b_id) for link in links) == 1 + sum(
        {link.case_a_id, link.case_b_id} == {thread_case, recurrence} for link in links
    )
    assert all(
        {thread_case, recurrence} & {link.case_a_id, link.case_b_id}
        or "aar-drafter" in (link.case_a.submitted_by.username, link.case_b.submitted_by.username)
        for link in links
    )
    assert SkillProposal.objects.count() == 1 and ReReview.objects.count() >= 1
    assert Case.objects.filter(submitted_by__username="aar-drafter").count() >= 2
    # Each with the typed lesson drafted beside it, waiting for a reviewer.
    drafted = Lesson.objects.filter(submitted_by__username="aar-drafter")
    assert drafted.exists() and set(drafted.values_list("status", flat=True)) == {Status.CANDIDATE}
    # Reviewers have addresses, so the revocation notified the reviewer who had approved it.
    assert any("ravi@example.com" in message.to for message in mail.outbox)
    assert result["url"] is None


def test_a_human_submitted_candidate_waits_beside_the_approved_case_it_resembles() -> None:
    """Issue 39, item 8: from the queue, a reviewer reaches a person's candidate compared word
    by word with the approved case it resembles."""
    with clock_frozen(NOW):
        result = load()
    people = Case.objects.filter(status=Status.CANDIDATE).exclude(submitted_via="api")
    paired = [
        link
        for link in NearDuplicate.objects.filter(status="open").select_related("case_a", "case_b")
        if any(
            mine.id in people.values_list("id", flat=True)
            and link.other(mine.id).status == Status.APPROVED
            for mine in (link.case_a, link.case_b)
        )
    ]
    assert paired, "no person's candidate has a similar approved case"
    candidate = Case.objects.get(pk=result["recurrence"]["case"])
    assert candidate.submitted_by.username == "olivia" and candidate.status == Status.CANDIDATE
    assert any(candidate.id in (link.case_a_id, link.case_b_id) for link in paired)

    client = Client()
    client.force_login(User.objects.get(username="rita"))
    queue = client.get(reverse("experience:queue")).content.decode()
    assert candidate.get_absolute_url() in queue
    panel = client.get(reverse("curation:case-similar", args=[candidate.digest])).content.decode()
    link = next(link for link in paired if candidate.id in (link.case_a_id, link.case_b_id))
    compare_url = reverse("curation:link-compare", args=[link.pk])
    assert compare_url in panel
    page = client.get(compare_url).content.decode()
    assert "Candidate" in page and "Approved case it resembles" in page
    assert page.index(candidate.title) < page.index(link.other(candidate.id).title)
    assert ("ins", "漏掉了") in marks(page) and ("del", "缺少") in marks(page)


def test_a_replay_report_is_stored_once(shared_demo_replay: None) -> None:
    load()
    first = demo_replay_report()
    report = ReplayReport.objects.get()
    assert report.pk == first and report.tickets > 0 and report.memory == "demo"
    assert demo_replay_report() == first and ReplayReport.objects.count() == 1


def test_everything_is_dated_relative_to_the_day_it_is_loaded() -> None:
    with clock_frozen(NOW):
        load()
    approved = [c.approved_at for c in Case.objects.exclude(approved_at=None)]
    assert approved and all(at and NOW - timedelta(days=30) < at < NOW for at in approved)
    revoked = Case.objects.get(status=Status.REVOKED)
    assert revoked.revoked_at is not None
    assert NOW - timedelta(days=4) < revoked.revoked_at < NOW - timedelta(days=2)
    started = Run.objects.get(run_id="demo-skill-run-1").started_at
    assert NOW - timedelta(days=11) < started < NOW - timedelta(days=9)
    assert all(at <= NOW for at in Event.objects.values_list("created_at", flat=True))


def test_loading_twice_changes_nothing() -> None:
    with clock_frozen(NOW):
        first = load()
    counts = row_counts()
    with clock_frozen(NOW + timedelta(days=1)):
        again = load()
    assert row_counts() == counts
    assert again["runs"]["new"] == [] and not again["thread"]["built"]
    assert again["experience"]["items"] == [
        {**item, "created": False} for item in first["experience"]["items"]
    ]


def test_the_address_is_printed_only_when_given() -> None:
    out = StringIO()
    call_command("load_demo", "--no-replay", stdout=out)
    assert "http" not in out.getvalue()
    out = StringIO()
    call_command("load_demo", "--no-replay", "--url", "http://127.0.0.1:8123", stdout=out)
    assert "Console: http://127.0.0.1:8123/ " in out.getvalue()


def readme_demo_commands() -> list[list[str]]:
    """The ``.venv/bin/python manage.py`` commands of the README's demo block, as argument
    lists."""
    text = README.read_text(encoding="utf-8")
    start = text.index("**The demo data**")
    block = text[start:].split("```sh\n", 1)[1].split("```", 1)[0]
    joined = block.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line, comments=True)
        if words[:2] == [".venv/bin/python", "manage.py"]:
            commands.append(words[2:])
    return commands


def test_the_readme_demo_examples_name_existing_items_and_work_as_printed() -> None:
    load()
    commands = readme_demo_commands()
    assert len(commands) >= 4
    text = " ".join(" ".join(c) for c in commands)
    ids = set(ITEM_ID.findall(text))
    assert ids, "the README's demo examples name no item"
    for item_id in ids:
        model = {"case": Case, "skill": Skill, "lesson": Lesson}[item_id.split(":")[0]]
        assert model.objects.filter(id=item_id).exists(), item_id
    for run_id in set(DEMO_RUN.findall(text)):
        assert Reference.objects.filter(run_id=run_id).exists(), run_id
    for command in commands:
        call_command(*command, stdout=StringIO())
