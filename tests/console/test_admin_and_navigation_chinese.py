"""In Chinese, the Django admin names its apps, models, columns and roles in Chinese, and an item
page's previous/next item is not worded as a list's previous/next page."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from tests.ui.factories import submit_case

pytestmark = pytest.mark.django_db

LATIN_WORD = re.compile(r"[A-Za-z]{3,}")


def chinese(user: User) -> Client:
    client = Client(headers={"Accept-Language": "zh-hans"})
    client.force_login(user)
    return client


def test_the_admin_names_apps_and_models_in_chinese(admin_user: User) -> None:
    html = chinese(admin_user).get("/admin/").content.decode()
    captions = re.findall(r'<caption>\s*<a [^>]*class="section"[^>]*>(.*?)</a>', html, re.S)
    models = re.findall(r'<th scope="row" id="[^"]+">\s*<a href="[^"]+"[^>]*>(.*?)</a>', html)
    # Every app's caption is Chinese but the third-party apps' own (tasks, login lockout).
    ours = [caption for caption in captions if caption not in {"Tasks Database Backend", "Axes"}]
    assert "经验记忆" in ours and "知识库" in ours and "审查控制台核心" in ours
    assert [c for c in ours if LATIN_WORD.search(c.replace("API", ""))] == [], ours
    for model in ("案例", "技能", "经验教训", "API 令牌", "事件"):
        assert model in models
    assert "Skill cases" not in html and "Replay reports" not in html


def test_the_admin_columns_and_roles_are_chinese(
    admin_user: User, reviewer: User, operator: User
) -> None:
    submit_case(operator, incident="INC-ADMIN-1")
    client = chinese(admin_user)
    users = client.get("/admin/auth/user/").content.decode()
    assert "角色" in users and ">审查员<" in users
    cases = client.get("/admin/experience/case/").content.decode()
    headers = re.findall(
        r'<div class="text">(?:<a [^>]*>|<span>)(.*?)(?:</a>|</span>)</div>', cases, re.S
    )
    assert headers
    assert [h for h in headers if LATIN_WORD.search(h.replace("ID", ""))] == []


def test_an_item_page_says_next_item_not_next_page(
    operator: User, reviewer: User, settings: Any
) -> None:
    first = submit_case(operator, incident="INC-NAV-1")
    submit_case(operator, incident="INC-NAV-2")
    html = chinese(reviewer).get(first.get_absolute_url()).content.decode()
    nav = re.search(r'<nav class="queue-nav".*?</nav>', html, re.S)
    assert nav is not None
    assert "下一项" in nav.group(0) or "上一项" in nav.group(0)
    assert "下一页" not in nav.group(0) and "上一页" not in nav.group(0)


def test_admin_names_write_no_migration() -> None:
    """The names are given at start-up, not declared: the migrations' state is unchanged."""
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
