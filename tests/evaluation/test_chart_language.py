"""The replay chart speaks the reader's language: stored in English, drawn again in Chinese."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import translation

from evaluation.chart import COST, QUALITY, chart_title, cjk_font
from evaluation.models import ReplayReport
from tests.evaluation.test_views import report  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db

LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


def test_the_charts_words_are_translated() -> None:
    with translation.override("zh-hans"):
        words = [str(label) for _name, label in (*QUALITY, *COST)]
        words.append(chart_title(ticket_set="demo-set", tickets=6, memory="demo"))
    english = [word for word in words if LATIN_WORD.search(word.replace("demo-set", ""))]
    assert english == []


@pytest.mark.skipif(cjk_font() is None, reason="no CJK font installed to draw Chinese with")
def test_the_report_page_shows_the_chart_in_the_readers_language(
    report: ReplayReport,  # noqa: F811
    reviewer: User,
) -> None:
    url = reverse("evaluation:report-chart", args=[report.pk])
    english = Client()
    english.force_login(reviewer)
    assert bytes(english.get(url).content) == bytes(report.chart)

    chinese = Client(headers={"Accept-Language": "zh-hans"})
    chinese.force_login(reviewer)
    drawn = chinese.get(url)
    assert drawn.status_code == 200 and drawn["Content-Type"] == "image/png"
    assert drawn.content.startswith(b"\x89PNG") and drawn.content != bytes(report.chart)
    # The page asks for the chart of its language, so a browser caches each apart.
    page = chinese.get(report.get_absolute_url()).content.decode()
    assert f"{url}?lang=zh-hans" in page
