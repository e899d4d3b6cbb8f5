"""Every time a page shows is in the viewer's chosen zone and named by the abbreviation valid at
that instant: version diffs, a case's validity, the replay report's notes; a draft is never said
to be published."""

from __future__ import annotations

import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import User
from django.template import Context, Template
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from experience.cases.models import Case
from knowledge.models import Document
from knowledge.services import document_save_new_version
from tests.diffmarks import new_text, old_text, section

pytestmark = pytest.mark.django_db

BERLIN = "Europe/Berlin"
BERLIN_ZONE = ZoneInfo(BERLIN)


def in_berlin(client: Client, user: User) -> Client:
    client.force_login(user)
    client.post(reverse("time-zone"), {"zone": BERLIN})
    return client


def test_a_version_diff_shows_times_in_the_chosen_zone(
    knowledge: None, operator: User, client: Client
) -> None:
    base = Document.objects.get(doc_key="rule-a", version=2)
    later = datetime.fromisoformat("2026-09-02T00:00:00+08:00")
    document_save_new_version(
        base=base, changes={"text": "Revised wording.", "valid_from": later}, actor=operator
    )
    url = reverse("knowledge:document-detail", args=["rule-a", 3])
    html = in_berlin(client, operator).get(url).content.decode()
    field = section(html, '<dd class="field-valid_from">')
    # 2026-09-01T00:00:00+08:00 is 2026-08-31 18:00 in a Berlin summer.
    assert old_text(field) == "2026-08-31 18:00 CEST"
    assert new_text(field) == "2026-09-01 18:00 CEST"
    assert "+00:00" not in field and "UTC" not in field


def test_a_case_names_the_zone_of_each_end_of_its_validity(
    candidate: Case, reviewer: User, client: Client
) -> None:
    html = in_berlin(client, reviewer).get(candidate.get_absolute_url()).content.decode()
    validity = re.search(r"valid</span> (.*?)</li>", html)
    assert validity, html
    start, end = validity.group(1).split(" → ")
    for shown, instant in ((start, candidate.valid_from), (end, candidate.valid_to)):
        abbreviation = timezone.localtime(instant, timezone=BERLIN_ZONE).tzname()
        assert shown.endswith(f" {abbreviation}"), (shown, abbreviation)


def test_a_draft_is_not_said_to_be_published(
    knowledge: None, operator: User, client: Client
) -> None:
    client.force_login(operator)
    listing = client.get(reverse("knowledge:document-list") + "?status=submitted").content.decode()
    assert "not published: a draft (2026-09-10 12:00 once approved)" in listing
    page = client.get(reverse("knowledge:document-detail", args=["case-a-draft", 1]))
    html = page.content.decode()
    assert "not published: a draft" in html and "<dt>Published</dt>" not in html


def test_a_replay_note_shows_its_times_in_the_zone() -> None:
    note = "demo memory approved at 2026-09-18T06:30:00+00:00: a reviewer revokes"
    with timezone.override(BERLIN_ZONE):
        shown = Template("{% load replay_words %}{{ note|local_times }}").render(
            Context({"note": note})
        )
    assert shown == "demo memory approved at 2026-09-18 08:30:00 CEST: a reviewer revokes"


@pytest.mark.parametrize("page", ["knowledge:search-preview", "investigations:investigation-new"])
def test_a_form_starts_in_the_chosen_zone(page: str, reviewer: User, client: Client) -> None:
    html = in_berlin(client, reviewer).get(reverse(page)).content.decode()
    field = re.search(r'<input[^>]*name="timezone"[^>]*>', html)
    assert field and f'value="{BERLIN}"' in field.group(0)


def test_a_time_typed_in_a_form_is_read_in_the_chosen_zone(
    knowledge: None, reviewer: User, client: Client
) -> None:
    from knowledge.forms import SearchPreviewForm

    in_berlin(client, reviewer)
    with timezone.override(BERLIN_ZONE):
        form = SearchPreviewForm(
            SearchPreviewForm.initial_values(timezone.now(), reviewer) | {"query": "券"}
        )
        assert form.is_valid(), form.errors
    assert form.cleaned_data["timezone"] == BERLIN_ZONE


def test_a_lesson_diff_line_shows_its_time_in_the_zone() -> None:
    from experience.pages.lessons import _lines

    with timezone.override(BERLIN_ZONE):
        lines = _lines({"valid_from": "2026-09-01T00:00:00+00:00"})
    assert '  "valid_from": "2026-09-01 02:00:00 CEST"' in lines
