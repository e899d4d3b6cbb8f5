"""The review queue: text search, and what its columns say of decided items."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.ui.factories import submit_case

pytestmark = pytest.mark.django_db


def test_the_queue_searches_titles_ids_and_incidents(
    client: Client, operator: User, reviewer: User
) -> None:
    wanted = submit_case(operator, incident="INC-SEARCH-1", title="Membership points missing")
    other = submit_case(operator, incident="INC-SEARCH-2", title="Coupon refused at store 2")
    client.force_login(reviewer)
    queue = reverse("experience:queue")

    html = client.get(queue, {"text": "membership"}).content.decode()
    assert wanted.title in html and other.title not in html

    html = client.get(queue, {"text": "INC-SEARCH-2"}).content.decode()
    assert other.title in html and wanted.title not in html

    html = client.get(queue, {"text": wanted.digest[:10]}).content.decode()
    assert wanted.title in html and other.title not in html
    # The search box is part of the filter form, its value kept.
    assert 'name="text"' in html and f'value="{wanted.digest[:10]}"' in html


def test_a_decided_item_shows_no_waiting_time(
    client: Client, memory: dict[str, Any], operator: User, reviewer: User
) -> None:
    waiting = submit_case(operator, incident="INC-WAITING")
    client.force_login(reviewer)
    html = client.get(reverse("experience:queue"), {"status": ""}).content.decode()
    rows = html.split("<tr>")
    approved_row = next(row for row in rows if memory["cases"][0].title in row)
    waiting_row = next(row for row in rows if waiting.title in row)
    assert "<time" in waiting_row
    assert "<time" not in approved_row
