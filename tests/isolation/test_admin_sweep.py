"""The two-tenant sweep through the Django admin: an admin of another tenant sees no row of
tenant A in any model's list, and A's rows answer on their change pages exactly as unknown ids.

Every registered model is asked, so a model added later without tenant scoping fails here.
"""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db.models import Model
from django.test import Client
from django.urls import NoReverseMatch, reverse

from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.helpers import tenants_exist

pytestmark = pytest.mark.django_db

A = "teahouse"
B = "riverside"
UNKNOWN_PK = "987654321"


def _tenant_of(row: Model) -> str | None:
    """The row's tenant, where the row has one of its own or through its document/case/run."""
    for path in ("tenant", "document__tenant", "case__tenant", "lesson__tenant", "run__tenant"):
        value: Any = row
        for part in path.split("__"):
            value = getattr(value, part, None)
            if value is None:
                break
        if isinstance(value, str) and value:
            return value
    return None


@pytest.fixture
def outsider() -> User:
    call_command("load_demo", "--no-replay", "--json", stdout=StringIO())
    tenants_exist(B)
    return user_set_role(username="river-admin", role=Role.ADMIN, tenants=[B])


def test_no_admin_list_or_change_page_shows_another_tenants_rows(outsider: User) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(outsider)
    checked = 0
    leaks = []
    for model in admin.site._registry:
        rows = [row for row in model._default_manager.all()[:50] if _tenant_of(row) == A]
        if not rows:
            continue
        opts = model._meta
        try:
            changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        except NoReverseMatch:
            continue
        listing = client.get(changelist)
        if listing.status_code == 200:
            visible_pks = {
                str(pk) for pk in listing.context["cl"].queryset.values_list("pk", flat=True)
            }
            shown = [row.pk for row in rows if str(row.pk) in visible_pks]
            if shown:
                leaks.append(f"{opts.label}: {len(shown)} of tenant {A} listed")
        for row in rows[:3]:
            change = f"admin:{opts.app_label}_{opts.model_name}_change"
            known = client.get(reverse(change, args=[row.pk]))
            unknown = client.get(reverse(change, args=[UNKNOWN_PK]))
            if known.status_code != unknown.status_code:
                leaks.append(
                    f"{opts.label} {row.pk}: {known.status_code} against {unknown.status_code}"
                )
            checked += 1
    assert checked >= 10  # the demo has rows of tenant A in the main models
    assert leaks == [], "\n".join(leaks)
