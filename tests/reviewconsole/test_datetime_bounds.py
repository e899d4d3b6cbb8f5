"""One bound for every datetime the product accepts, on every input path, and pages that never
crash on a stored value outside it.

The bound: an instant is accepted when its date lies in the years 1900-2999 in UTC and in every
time zone the console may show it in (the configured one, and any zone a user picks).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import pytest
from django import forms
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db.models import QuerySet
from django.test import Client
from django.urls import reverse
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from agentapi.services import token_create
from curation.domain.threads import parse_thread
from curation.forms import RecertifyForm
from experience.cases.models import Case, Skill
from knowledge.forms import COMMON_ZONES
from knowledge.models import Document
from knowledge.services import documents_import
from reviewconsole.errors import ValidationFailure
from reviewconsole.formfields import ZonedDateTimeField
from reviewconsole.templatetags.datetimes import when
from reviewconsole.timeparse import (
    EARLIEST,
    LATEST,
    OUT_OF_RANGE,
    check_bounds,
    parse_aware_datetime,
)
from tests.api.conftest import NOW, BearerClient, case_body, search_body
from tests.knowledge.conftest import document
from tests.mcp.test_server import call, text_of
from tests.ui.factories import approved_case, approved_skill, case_data, submit_case

FAR_FUTURE = "9999-12-31T23:59:59+00:00"
FAR_PAST = "0001-01-01T00:00:00+00:00"
OUTSIDE = [
    FAR_FUTURE,
    FAR_PAST,
    "9999-12-31T23:59:59-08:00",  # not even representable in UTC
    "0001-01-01T00:00:00+08:00",
    "3000-01-01T00:00:00+00:00",
    "1899-12-31T23:59:59+00:00",
    # In UTC these are inside the years, but not in every zone a page may show them in.
    "1900-01-01T00:00:00+00:00",
    "2999-12-31T20:00:00+00:00",
]
INSIDE = ["1900-01-02T00:00:00+00:00", "2999-12-30T23:59:59+00:00", "2026-09-18T14:00:00+08:00"]
DISPLAY_ZONES = [ZoneInfo(settings.TIME_ZONE), UTC, *(ZoneInfo(name) for name in COMMON_ZONES)]


# --- the one bound -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", OUTSIDE)
def test_the_parser_refuses_dates_outside_the_bound_naming_the_field(text: str) -> None:
    with pytest.raises(ValidationFailure) as failure:
        parse_aware_datetime(text, field="valid_to")
    assert (failure.value.field, failure.value.message) == ("valid_to", OUT_OF_RANGE)


@pytest.mark.parametrize("text", INSIDE)
def test_the_parser_accepts_dates_inside_the_bound(text: str) -> None:
    assert parse_aware_datetime(text, field="valid_to") == datetime.fromisoformat(text)


@hypothesis_settings(max_examples=200, derandomize=True, deadline=None)
@given(st.datetimes(timezones=st.sampled_from([UTC, *DISPLAY_ZONES])))
def test_every_accepted_instant_has_a_date_in_the_years_in_every_display_zone(
    moment: datetime,
) -> None:
    try:
        accepted = check_bounds(moment, field="at")
    except ValidationFailure:
        return
    for zone in DISPLAY_ZONES:
        assert 1900 <= accepted.astimezone(zone).year <= 2999


def test_the_bound_is_a_day_inside_the_years() -> None:
    assert datetime(1900, 1, 1, tzinfo=UTC) + timedelta(days=1) == EARLIEST
    assert datetime(3000, 1, 1, tzinfo=UTC) - timedelta(days=1) > LATEST
    assert check_bounds(EARLIEST, field="at") == EARLIEST
    assert check_bounds(LATEST, field="at") == LATEST
    for outside in (EARLIEST - timedelta(microseconds=1), LATEST + timedelta(microseconds=1)):
        with pytest.raises(ValidationFailure):
            check_bounds(outside, field="at")


# --- every input path ------------------------------------------------------------------------


@pytest.fixture
def agent_token(agent: User, frozen_clock: Any) -> str:
    frozen_clock(NOW)
    return token_create(user=agent, name="bounds").text


@pytest.fixture
def agent_client(agent_token: str) -> BearerClient:
    return BearerClient(agent_token)


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["valid_from", "valid_to"])
@pytest.mark.parametrize("text", [FAR_FUTURE, FAR_PAST])
def test_api_case_proposal_refuses_extreme_validity(
    agent_client: BearerClient, name: str, text: str
) -> None:
    body = case_body(**{name: text})
    if name == "valid_from":
        body["valid_from"], body["valid_to"] = text, "2027-12-31T00:00:00+08:00"
    response = agent_client.post_json("/api/v1/cases", body)
    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == ["body", name]
    assert not Case.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["occurred_at", "known_at"])
def test_api_search_refuses_extreme_times(agent_client: BearerClient, name: str) -> None:
    response = agent_client.post_json("/api/v1/knowledge/search", search_body(**{name: FAR_PAST}))
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", name]


@pytest.mark.django_db
def test_mcp_case_proposal_refuses_extreme_validity(agent_token: str) -> None:
    result = call(agent_token, "propose_case", case_body(valid_to=FAR_FUTURE))
    assert result.is_error
    assert "valid_to" in text_of(result)
    assert not Case.objects.exists()


@pytest.mark.django_db
def test_case_import_refuses_extreme_validity(tmp_path: Path, operator: User) -> None:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps([case_data(valid_to=FAR_FUTURE)]), encoding="utf-8")
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("import_cases", str(path), "--as", operator.username, "--json", stdout=out)
    error = json.loads(out.getvalue())
    assert error["ok"] is False and error["field"].endswith("valid_to")
    assert OUT_OF_RANGE in error["error"]
    assert not Case.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["valid_from", "valid_to", "published_at"])
def test_knowledge_import_refuses_extreme_dates(tmp_path: Path, operator: User, name: str) -> None:
    path = tmp_path / "knowledge.json"
    path.write_text(json.dumps([document(**{name: FAR_FUTURE})]), encoding="utf-8")
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("import_knowledge", str(path), "--as", operator.username, "--json", stdout=out)
    error = json.loads(out.getvalue())
    assert error["field"].endswith(name) and OUT_OF_RANGE in error["error"]
    assert not Document.objects.exists()


def test_thread_import_refuses_extreme_message_times() -> None:
    thread = {
        "id": "thread-bounds",
        "tenant": "teahouse",
        "title": "A thread",
        "messages": [
            {"id": "m1", "author": "Ann", "role": "customer", "time": FAR_PAST, "text": "hi"}
        ],
    }
    with pytest.raises(ValidationFailure) as failure:
        parse_thread(thread)
    assert failure.value.field == "messages[0].time"


def test_console_datetime_fields_refuse_extreme_dates() -> None:
    with pytest.raises(forms.ValidationError) as error:
        ZonedDateTimeField(label="Valid to").clean(FAR_FUTURE)
    assert OUT_OF_RANGE in error.value.messages[0]
    form = RecertifyForm({"valid_from": INSIDE[2], "valid_to": FAR_FUTURE, "reason": "ok"})
    assert not form.is_valid() and "valid_to" in form.errors


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"occurred_at": "0001-01-01T00:00"}, "occurred_at"),
        ({"known_at": "9999-12-31T23:59"}, "known_at"),
        ({"occurred_at": "1899-12-31T23:00+00:00"}, "occurred_at"),
    ],
)
def test_search_preview_refuses_extreme_times(
    operator: User, client: Client, changes: dict[str, str], field: str
) -> None:
    client.force_login(operator)
    params = {
        "query": "优惠券",
        "tenant": "teahouse",
        "brand": "leaf-and-cup",
        "store": "store-002",
        "campaign": "campaign-b",
        "occurred_at": "2026-09-18T14:00",
        "known_at": "2026-09-18T14:10",
        "timezone": "Asia/Shanghai",
        "limit": "4",
        **changes,
    }
    response = client.get(reverse("knowledge:search-preview") + "?" + urlencode(params))
    assert response.status_code == 422
    form = response.context["form"]
    assert OUT_OF_RANGE in form.errors[field][0]


@pytest.mark.django_db
@pytest.mark.parametrize("params", [{"date_to": "9999-12-31"}, {"date_from": "0001-01-01"}])
def test_audit_log_date_filters_refuse_extreme_days(
    admin_user: User, client: Client, params: dict[str, str]
) -> None:
    client.force_login(admin_user)
    response = client.get(reverse("event-list") + "?" + urlencode(params))
    assert response.status_code in (200, 422)
    form = response.context["form"]
    assert OUT_OF_RANGE in form.errors[next(iter(params))][0]


# --- pages never crash on a stored value ---------------------------------------------------------

STORED_FAR_FUTURE = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
STORED_FAR_PAST = datetime(1, 1, 1, tzinfo=UTC)


@pytest.fixture
def extreme_rows(operator: User, reviewer: User, second_reviewer: User) -> dict[str, Any]:
    """Rows stored before the bound existed (written directly, as an old import could have)."""
    candidate = submit_case(operator, incident="INC-BOUNDS-CANDIDATE")
    first = approved_case(submitter=operator, reviewer=reviewer, incident="INC-BOUNDS-1")
    second = approved_case(submitter=operator, reviewer=reviewer, incident="INC-BOUNDS-2")
    skill = approved_skill(
        submitter=operator, reviewer=second_reviewer, case_ids=[first.id, second.id]
    )
    # The plain queryset update: the models refuse to change hashed content themselves.
    QuerySet.update(
        Case.objects.filter(pk=candidate.pk),
        valid_from=STORED_FAR_PAST,
        valid_to=STORED_FAR_FUTURE,
    )
    QuerySet.update(Case.objects.filter(pk=first.pk), valid_to=STORED_FAR_FUTURE)
    QuerySet.update(Skill.objects.filter(pk=skill.pk), valid_to=STORED_FAR_FUTURE)
    documents_import(items=[document()], actor=operator)
    QuerySet.update(
        Document.objects.all(),
        valid_from=STORED_FAR_PAST,
        valid_to=STORED_FAR_FUTURE,
        published_at=STORED_FAR_PAST,
    )
    return {"candidate": candidate, "approved": first, "skill": skill}


def _pages(rows: dict[str, Any]) -> list[str]:
    doc = Document.objects.get()
    return [
        "/",
        reverse("experience:queue"),
        reverse("experience:case-detail", args=[rows["candidate"].id.removeprefix("case:")]),
        reverse("experience:case-detail", args=[rows["approved"].id.removeprefix("case:")]),
        reverse("experience:skill-detail", args=[rows["skill"].id.removeprefix("skill:")]),
        reverse("knowledge:document-list"),
        reverse("knowledge:document-detail", args=[doc.doc_key, doc.version]),
        "/admin/knowledge/document/",
        f"/admin/knowledge/document/{doc.pk}/change/",
        "/admin/experience/case/",
        f"/admin/experience/case/{rows['candidate'].pk}/change/",
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("role", ["reviewer", "operator"])
def test_pages_show_stored_extreme_dates_instead_of_failing(
    request: pytest.FixtureRequest, extreme_rows: dict[str, Any], role: str
) -> None:
    client = Client(raise_request_exception=False)
    client.force_login(request.getfixturevalue(role))
    statuses = {path: client.get(path).status_code for path in _pages(extreme_rows)}
    assert {path: status for path, status in statuses.items() if status >= 500} == {}
    queue = client.get(reverse("experience:queue")).content.decode()
    assert "9999-12-31" in queue


def test_the_display_filter_falls_back_to_utc_text() -> None:
    assert when(STORED_FAR_FUTURE, "Y-m-d H:i") == "9999-12-31 23:59 UTC"
    # Year 1 has a local time in Shanghai (a few hours later), so it is shown there.
    assert when(STORED_FAR_PAST, "Y-m-d") == "0001-01-01"
    # Inside the range it shows local time, as Django's date filter does.
    local = datetime(2026, 9, 18, 6, tzinfo=UTC)
    assert when(local, "Y-m-d H:i") == "2026-09-18 14:00"
    assert when(None, "Y-m-d") == ""
