"""The case and skill pages load curation's panels: similar cases, and support in incidents."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def panel_url(page: str) -> str:
    match = re.search(r'hx-get="(/curation/[^"]+)" hx-trigger="load"', page)
    assert match, "the page does not load a curation panel"
    return match.group(1)


@pytest.mark.parametrize(
    ("route", "item", "expected"),
    [
        ("experience:case-detail", "case", "/similar/"),
        ("experience:skill-detail", "skill", "/support/"),
    ],
)
def test_item_pages_load_their_curation_panel(
    memory: dict[str, Any], reviewer: User, route: str, item: str, expected: str
) -> None:
    client = Client()
    client.force_login(reviewer)
    target = memory["cases"][0] if item == "case" else memory["skill"]
    page = client.get(reverse(route, args=[target.id.split(":", 1)[1]])).content.decode()

    url = panel_url(page)
    assert expected in url and target.id.split(":", 1)[1] in url
    assert client.get(url).status_code == 200
    assert client.get(url, HTTP_HX_REQUEST="true").status_code == 200
