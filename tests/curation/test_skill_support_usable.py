"""A skill's support counts only the cited cases usable now: a revoked case supports nothing,
as the skill page's availability says (no "2 distinct incidents" beside "unavailable")."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_a_revoked_cited_case_no_longer_counts_as_support(client: Client) -> None:
    out = StringIO()
    call_command("load_demo", "--no-replay", "--json", stdout=out)
    available, unavailable = json.loads(out.getvalue())["skills"]
    client.force_login(User.objects.get(username="rita"))

    def support(skill_id: str) -> str:
        url = reverse("curation:skill-support", args=[skill_id.split(":", 1)[1]])
        return client.get(url).content.decode()

    assert "2 distinct incidents" in support(available)
    html = support(unavailable)
    assert "1 distinct incident" in html and "from 1 usable cited case" in html
    assert "2 distinct incidents" not in html
