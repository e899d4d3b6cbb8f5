"""Texts a newcomer meets in the first hour say what the product does (issue 28, in part)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_operator_dashboard_says_where_documents_are_maintained(
    operator: User, client: Client
) -> None:
    """Documents are edited and approved on the console's knowledge pages, not in the admin."""
    client.force_login(operator)
    html = client.get(reverse("home")).content.decode()
    assert "Maintain knowledge documents" in html
    assert "new version in the admin" not in html
    assert "which another operator approves" in html
    chinese = client.get(reverse("home"), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "由另一位运营人员审批" in chinese.content.decode()


def test_the_admin_menu_spells_search_entries(admin_user: User, client: Client) -> None:
    client.force_login(admin_user)
    html = client.get(reverse("admin:index")).content.decode()
    assert "Search entries" in html
    assert "Search entrys" not in html
