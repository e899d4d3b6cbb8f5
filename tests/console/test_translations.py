"""The Simplified Chinese catalogue is complete and compiled, and the pages speak it.

Every message of the catalogue has a translation that is not marked fuzzy, keeps the message's
placeholders, and is in the compiled catalogue the server reads; so a string added later fails
here until it is translated. The investigation and lesson pages render in Chinese.
"""

from __future__ import annotations

import ast
import gettext
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from experience.cases.models import Case
from experience.lessons import services as lessons
from experience.lessons.models import Lesson
from experience.lessons.schema import parse_lesson
from tests.experience.conftest import approved_case, at_now, submit_case
from tests.experience.lessons.test_lessons import lesson_data
from tests.knowledge.conftest import fixture_documents, knowledge_base

__all__ = ["approved_case", "at_now", "fixture_documents", "knowledge_base", "submit_case"]

CATALOGUE = Path(settings.BASE_DIR) / "locale" / "zh_Hans" / "LC_MESSAGES"
PLACEHOLDER = re.compile(r"%\(\w+\)[sdf]|%[sdf]")
CHINESE = {"Accept-Language": "zh-hans"}


@dataclass
class Entry:
    line: int
    flags: set[str] = field(default_factory=set)
    parts: dict[str, str] = field(default_factory=dict)  # msgctxt, msgid, msgstr, msgstr[0], …


def entries(text: str) -> list[Entry]:
    """The catalogue's live entries (obsolete ``#~`` ones left out), with their flags."""
    found: list[Entry] = []
    current: Entry | None = None
    key = ""
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            current = None
            continue
        if line.startswith("#~"):
            continue
        if current is None:
            current = Entry(number)
            found.append(current)
        if line.startswith("#,"):
            current.flags |= {flag.strip() for flag in line[2:].split(",")}
        elif line.startswith("#"):
            continue
        elif line.startswith('"'):
            current.parts[key] += ast.literal_eval(line)
        else:
            key, _, value = line.partition(" ")
            current.parts[key] = ast.literal_eval(value)
    return [entry for entry in found if "msgid" in entry.parts]


def translations(entry: Entry) -> list[str]:
    return [value for key, value in entry.parts.items() if key.startswith("msgstr")]


def test_the_parser_sees_empty_and_fuzzy_entries() -> None:
    sample = (
        'msgid ""\nmsgstr "Language: zh_Hans\\n"\n\n'
        '#, fuzzy, python-format\nmsgid "Run %(run)s"\nmsgstr "运行"\n\n'
        'msgid "Long"\nmsgstr ""\n"长"\n\n'
        'msgid "Empty"\nmsgstr ""\n\n'
        '#~ msgid "Gone"\n#~ msgstr ""\n'
    )
    parsed = entries(sample)
    assert [entry.parts["msgid"] for entry in parsed] == ["", "Run %(run)s", "Long", "Empty"]
    assert "fuzzy" in parsed[1].flags
    assert translations(parsed[2]) == ["长"] and translations(parsed[3]) == [""]


def test_every_message_is_translated_and_none_is_fuzzy() -> None:
    catalogue = entries((CATALOGUE / "django.po").read_text(encoding="utf-8"))
    assert len(catalogue) > 500
    fuzzy = [entry.parts["msgid"] for entry in catalogue if "fuzzy" in entry.flags]
    empty = [
        entry.parts["msgid"]
        for entry in catalogue[1:]  # the header's msgid is empty on purpose
        if not all(text.strip() for text in translations(entry))
    ]
    assert not fuzzy, f"fuzzy translations: {fuzzy}"
    assert not empty, f"untranslated messages: {empty}"


def test_every_translation_keeps_the_placeholders() -> None:
    catalogue = entries((CATALOGUE / "django.po").read_text(encoding="utf-8"))
    broken = [
        entry.parts["msgid"]
        for entry in catalogue[1:]
        for text in translations(entry)
        if sorted(set(PLACEHOLDER.findall(text)))
        != sorted(set(PLACEHOLDER.findall(entry.parts["msgid"])))
    ]
    assert not broken, f"placeholders changed: {broken}"


def test_the_compiled_catalogue_is_up_to_date() -> None:
    with (CATALOGUE / "django.mo").open("rb") as compiled:
        catalog: dict[Any, str] = gettext.GNUTranslations(compiled)._catalog  # type: ignore[attr-defined]
    stale = []
    for entry in entries((CATALOGUE / "django.po").read_text(encoding="utf-8"))[1:]:
        msgid = entry.parts["msgid"]
        if "msgctxt" in entry.parts:
            msgid = f"{entry.parts['msgctxt']}\x04{msgid}"
        key: Any = (msgid, 0) if "msgid_plural" in entry.parts else msgid
        expected = translations(entry)[0]
        if catalog.get(key) != expected:
            stale.append(entry.parts["msgid"])
    assert not stale, f"compile the catalogue (compilemessages); stale: {stale[:5]}"


# --- pages ---------------------------------------------------------------------------------------


def chinese_client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_investigation_pages_render_in_chinese(knowledge_base: None, reviewer: User) -> None:
    from investigations.models import Investigation, InvestigationRequest

    client = chinese_client(reviewer)
    form = client.get(reverse("investigations:investigation-new"), headers=CHINESE).content.decode()
    assert '<html lang="zh-hans">' in form
    assert "排查工单" in form and "适用范围、时间和事实" in form and "开始排查" in form
    assert "Investigate a ticket" not in form

    client.post(
        reverse("investigations:investigation-new"),
        {
            "text": "两杯水果茶，优惠券用不了",
            "tenant": "teahouse",
            "brand": "leaf-and-cup",
            "store": "store-001",
            "campaign": "campaign-a",
            "deployment": "release-1",
            "occurred_at": "2026-09-18T14:00:00",
            "known_at": "2026-09-18T14:10:00",
            "timezone": "Asia/Shanghai",
            "channel": "miniapp",
            "product": "fruit-tea",
            "basket_cents": "3200",
        },
        headers=CHINESE,
    )
    page = client.get(
        Investigation.objects.get().get_absolute_url(), headers=CHINESE
    ).content.decode()
    for chinese in ("已验证", "引用", "步骤", "完整结果", "永久链接"):
        assert chinese in page, chinese
    for english in ("Verified:", "Citations", "Full result", "Permanent link"):
        assert english not in page, english

    # A run still waiting for a worker.
    InvestigationRequest.objects.update(state="queued", investigation=None, steps=[])
    waiting = client.get(InvestigationRequest.objects.get().get_absolute_url(), headers=CHINESE)
    html = waiting.content.decode()
    assert "正在等待后台进程开始运行" in html and "刷新" in html and "排队中" in html
    assert "Waiting for a worker" not in html


@pytest.mark.django_db
def test_the_lesson_page_renders_in_chinese(
    approved_case: Callable[..., Case], reviewer: User, second_reviewer: User, at_now: datetime
) -> None:
    cases = [
        approved_case(incident="INC-1", title="二号店优惠券无法使用：门店范围漏配"),
        approved_case(incident="INC-2", title="二号店水果茶券不可用：门店列表缺失"),
    ]
    lesson: Lesson
    lesson, _ = lessons.lesson_submit(
        content=parse_lesson(lesson_data([case.id for case in cases])), actor=reviewer
    )
    client = chinese_client(second_reviewer)
    page = client.get(lesson.get_absolute_url(), headers=CHINESE).content.decode()
    assert '<html lang="zh-hans">' in page
    for chinese in ("场景", "前提条件", "结论", "支持证据", "置信度"):
        assert chinese in page, chinese
    for english in ("Precondition", "Evidence for", "Confidence"):
        assert english not in page, english
    listing = client.get(reverse("experience:lesson-list"), headers=CHINESE).content.decode()
    assert "经验教训" in listing
