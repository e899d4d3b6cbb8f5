"""A page links a run only for a viewer who may open it: an operator (no run permission) sees the
run id, never a link that answers 403."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def _run_links(client: Client, url: str) -> list[str]:
    html = client.get(url).content.decode()
    return re.findall(r'href="(/runs/[^"]+)"', html)


def test_the_skill_page_links_its_runs_only_for_who_may_open_them(
    memory: dict[str, Any], operator: User, reviewer: User
) -> None:
    skill, run = memory["skill"], memory["run"]
    run_url = reverse("experience:run-detail", args=[run.run_id])
    for user, linked in ((reviewer, True), (operator, False)):
        client = Client()
        client.force_login(user)
        links = _run_links(client, skill.get_absolute_url())
        assert (run_url in links) is linked, user.username
        for link in links:
            assert client.get(link).status_code == 200, (user.username, link)
        assert run.run_id in client.get(skill.get_absolute_url()).content.decode()
