"""Scope filters offer the tenants, brands, stores, campaigns and deployments that exist, and
only those the user may see."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from experience.cases import services
from experience.cases.schema import parse_case
from reviewconsole.services import user_set_role
from tests.conftest import PASSWORD
from tests.experience.conftest import SCOPE, case_data

pytestmark = pytest.mark.django_db


def options(html: str, name: str) -> list[str]:
    match = re.search(rf'<datalist id="id_{name}-options">(.*?)</datalist>', html, re.S)
    return re.findall(r'<option value="([^"]*)">', match.group(1)) if match else []


def choices(html: str, name: str) -> list[str]:
    """The values a ``<select name=name>`` offers, leaving out its "any" choice."""
    match = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', html, re.S)
    found = re.findall(r'<option value="([^"]*)"', match.group(1)) if match else []
    return [value for value in found if value]


def test_the_queue_filters_offer_existing_values_within_the_user_tenants(
    reviewer: User, client: Client
) -> None:
    at = datetime.fromisoformat("2026-10-01T00:00:00+08:00")
    services.case_submit(content=parse_case(case_data()), actor=reviewer, now=at)
    other = {**SCOPE, "tenant": "rival", "store": "rival-store-9", "deployment": "rival-r1"}
    services.case_submit(
        content=parse_case(case_data(scope=other, title="别家案例")), actor=reviewer, now=at
    )
    wide = user_set_role(username="wendy", role="reviewer", password=PASSWORD)
    client.force_login(wide)
    html = client.get(reverse("experience:queue")).content.decode()
    # The queue's scope filters are selects of the values that exist, not free text.
    assert choices(html, "store") == sorted({SCOPE["store"], "rival-store-9"})
    assert choices(html, "deployment") == sorted({SCOPE["deployment"], "rival-r1"})

    limited = user_set_role(
        username="lena", role="reviewer", password=PASSWORD, tenants=[SCOPE["tenant"]]
    )
    client.force_login(limited)
    html = client.get(reverse("experience:queue")).content.decode()
    assert choices(html, "store") == [SCOPE["store"]]
    assert "rival" not in html
    # A value in the address that no item has still shows as chosen (a shared link keeps it).
    html = client.get(reverse("experience:queue") + "?store=store-999").content.decode()
    assert choices(html, "store") == sorted([SCOPE["store"], "store-999"])
    assert '<option value="store-999" selected>' in html
    # A fragment (htmx) renders no filter form and reads no scope values.
    fragment = client.get(reverse("experience:queue"), headers={"HX-Request": "true"})
    assert "<select" not in fragment.content.decode()
