"""Every console page, rendered in Chinese with the demo data, shows none of the product's own
English: not its catalogue's messages, nor a code or a literal the product writes into a page
(``candidate``, ``success pattern``, ``resolved by lead``) without translating it.

The product's English is every word of its templates and of the string literals of its Python
modules; what people wrote (the demo's data, usernames, scope values, ids) is not, and neither is
what a page shows as code (``<code>``, ids, run ids, the technical JSON of a step).
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from html import unescape
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from console.demo import INVESTIGATION_RUN, PROMPT_SKILL_RUN, SECOND_SKILL_RUN, THREAD_FIXTURE
from curation.aar_drafts import DRAFTER
from evaluation.models import ReplayReport
from experience.cases.models import Case, Skill
from experience.core.models import Status
from experience.lessons.models import Lesson, LessonConflict
from investigations.models import Investigation
from knowledge.models import Document
from reviewconsole.cli import read_json_file
from reviewconsole.models import Event
from reviewconsole.timezones import zone_names

pytestmark = pytest.mark.django_db

BASE = Path(settings.BASE_DIR)
PRODUCT_PACKAGES = (
    "agentapi",
    "console",
    "curation",
    "evaluation",
    "experience",
    "investigations",
    "knowledge",
    "reviewconsole",
)
WORD = re.compile(r"[A-Za-z][A-Za-z]+(?:'[a-z]+)?")
# Names that read the same in Chinese: the product's, protocols and formats, zone names.
SAME_IN_CHINESE = {
    "API",
    "CSV",
    "JSON",
    "MCP",
    "OAuth",
    "HTTP",
    "ISO",
    "UTC",
    "CST",
    "Asia",
    "Shanghai",
    "English",
    "RRF",
    "Jaccard",
    "Copy",  # the copy button is shown by script, its label set there
    "ID",
    "AAR",  # after-action review, in the titles of drafted cases
    "Wilson",  # the Wilson lower bound of a confidence
}
# Parts of a page that show code, ids or someone else's words verbatim (a quoted evidence text,
# the model's own words): removed before reading the words.
CODE_PARTS = re.compile(
    r"(?s)<(script|style|code|kbd|pre|textarea|datalist|blockquote|q)\b.*?</\1>"
    r'|<ul class="model-words">.*?</ul>'
    # The reasons an event was written with, as written (people's and the runs' own).
    r'|<td class="audit-reason"[^>]*>.*?</td>'
    r'|<[^>]+class="[^"]*\b(?:mono|item-id|run-id|source-id|copy-id|visually-hidden)\b[^"]*"[^>]*>'
    r"[^<]*"
)


def _python_literals(path: Path) -> set[str]:
    words: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            words |= set(WORD.findall(node.value))
    return words


@cache
def product_words() -> frozenset[str]:
    """Every word the product itself writes: its templates and its Python string literals."""
    words: set[str] = set()
    for template in (BASE / "templates").rglob("*.html"):
        text = re.sub(r"\{[%#{].*?[%#}]\}", " ", template.read_text(encoding="utf-8"))
        words |= set(WORD.findall(re.sub(r"<[^>]+>", " ", text)))
    for package in PRODUCT_PACKAGES:
        for module in (BASE / package).rglob("*.py"):
            # The demo modules write the demo's data, which people would write.
            if "migrations" not in module.parts and module.name != "demo.py":
                words |= _python_literals(module)
    return frozenset(words)


@cache
def data_words() -> frozenset[str]:
    """Words people wrote into the demo's data (fixtures), shown as they wrote them."""
    words: set[str] = set()
    for fixture in (BASE / "fixtures").rglob("*.json"):
        words |= set(WORD.findall(fixture.read_text(encoding="utf-8")))
    for demo in BASE.glob("*/demo.py"):
        words |= _python_literals(demo)
    # Time zone names are names (the time zone page lists them all).
    words |= {word for zone in zone_names() for word in WORD.findall(zone)}
    return frozenset(words)


def english_on(html: str, people: frozenset[str] = frozenset()) -> list[str]:
    body = html.split("<main", 1)[1].split(">", 1)[1].split("</main>", 1)[0]
    visible = unescape(re.sub(r"<[^>]+>", " ", CODE_PARTS.sub(" ", body)))
    product, data = product_words(), data_words() | people
    return sorted(
        {
            word
            for word in WORD.findall(visible)
            if word in product and word not in data and word not in SAME_IN_CHINESE
        }
    )


def _path(item_id: str) -> str:
    kind, digest = item_id.split(":", 1)
    return f"/{kind}s/{digest}/"


def demo_pages() -> dict[str, list[str]]:
    """The pages each demo account opens, with the demo loaded."""
    approved = Case.objects.filter(status=Status.APPROVED).order_by("id").first()
    # A draft the after-action drafter wrote is its text, in English, like a person's text.
    candidate = (
        Case.objects.filter(status=Status.CANDIDATE)
        .exclude(submitted_by__username=DRAFTER)
        .order_by("id")
        .first()
    )
    revoked = Case.objects.filter(status=Status.REVOKED).first()
    assert approved and candidate and revoked
    skills = [_path(skill.id) for skill in Skill.objects.order_by("id")]
    # So is a lesson it drafted beside the case.
    lessons = [
        _path(lesson.id)
        for lesson in Lesson.objects.exclude(submitted_by__username=DRAFTER).order_by("id")
    ]
    assert lessons
    document = Document.objects.order_by("doc_key", "version").first()
    assert document is not None
    thread = read_json_file(str(THREAD_FIXTURE))["id"]
    investigation = Investigation.objects.get(run_id=INVESTIGATION_RUN)
    reviewer_pages = [
        "/",
        "/queue/",
        "/queue/?status=approved",
        _path(approved.id),
        _path(candidate.id),
        _path(revoked.id),
        *skills,
        "/lessons/",
        *lessons,
        "/lessons/conflicts/",
        "/runs/",
        f"/runs/{SECOND_SKILL_RUN}/",
        "/runs/demo-skill-run-1/",
        f"/runs/{PROMPT_SKILL_RUN}/",
        "/investigations/",
        f"/investigations/{investigation.pk}/",
        "/knowledge/",
        document.get_absolute_url(),
        "/knowledge/search/",
        "/curation/",
        "/curation/threads/",
        f"/curation/threads/{thread}/",
        "/curation/similar/",
        "/curation/incidents/",
        "/curation/rereview/",
        "/curation/proposals/",
        "/time-zone/",
    ]
    reviewer_pages += [f"/evaluation/{report.pk}/" for report in ReplayReport.objects.all()]
    reviewer_pages.append("/evaluation/")
    return {
        "rita": reviewer_pages,
        "olivia": ["/", "/knowledge/new/", "/curation/"],
        "ada": ["/", "/audit/"],
    }


def test_the_detector_finds_the_products_english_and_leaves_data_and_code_alone() -> None:
    assert "Dashboard" in product_words() and "Dashboard" not in data_words()
    html = (
        '<main id="main"><h1>仪表盘</h1><p>Dashboard</p><code>needs_review</code>'
        '<span class="mono">case:0123</span><blockquote>Check the rule</blockquote>'
        "<p>leaf-and-cup rita</p></main>"
    )
    assert english_on(html, frozenset({"rita"})) == ["Dashboard"]


def test_every_page_speaks_chinese(shared_demo_replay: None) -> None:
    call_command("load_demo", stdout=StringIO())
    assert LessonConflict.objects.exists() and ReplayReport.objects.exists()
    # Account names are people's (or the system's own accounts, named in the audit log).
    names = [*User.objects.values_list("username", flat=True)]
    names += Event.objects.values_list("actor_name", flat=True).distinct()
    people = frozenset(part for name in names for part in name.split("-"))
    found: dict[str, list[str]] = {}
    for username, paths in demo_pages().items():
        client = Client(headers={"Accept-Language": "zh-hans"})
        client.force_login(User.objects.get(username=username))
        for path in paths:
            response = client.get(path, follow=True)
            assert response.status_code == 200, (username, path)
            html = response.content.decode()
            assert '<html lang="zh-hans">' in html, path
            english = english_on(html, people)
            if english:
                found[f"{username} {path}"] = english
    assert not found, json.dumps(found, ensure_ascii=False, indent=1)
