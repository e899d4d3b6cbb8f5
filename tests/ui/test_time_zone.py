"""One time zone for every time shown: the user's choice, else the deployment's, named in the header."""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.template import Context, Template
from django.urls import reverse
from django.utils.timezone import override

from reviewconsole.models import Event
from reviewconsole.timezones import SESSION_KEY
from tests.ui.conftest import csrf_client, csrf_token

pytestmark = pytest.mark.django_db

CHOSEN = "America/New_York"
FORMAT = "%Y-%m-%d %H:%M:%S"


def _choose(client: Any, zone: str, next_url: str = "/") -> Any:
    return client.post(
        reverse("time-zone"),
        {"zone": zone, "next": next_url, "csrfmiddlewaretoken": csrf_token(client)},
    )


def test_the_header_names_the_deployments_zone_by_default(reviewer: User) -> None:
    html = csrf_client(reviewer).get(reverse("experience:run-list")).content.decode()
    assert f"Times in {settings.TIME_ZONE}" in html


def test_run_times_render_in_the_chosen_zone(memory: dict[str, Any], admin_user: User) -> None:
    client = csrf_client(admin_user)
    started = memory["run"].started_at
    deployment = started.astimezone(ZoneInfo(settings.TIME_ZONE)).strftime(FORMAT)
    assert deployment in client.get(reverse("experience:run-list")).content.decode()

    assert _choose(client, CHOSEN).status_code == 303
    chosen = started.astimezone(ZoneInfo(CHOSEN)).strftime(FORMAT)
    assert chosen != deployment
    for page in (reverse("experience:run-list"), memory["run"].get_absolute_url()):
        html = client.get(page).content.decode()
        assert f"Times in {CHOSEN}" in html
        assert chosen in html and deployment not in html


def test_audit_times_render_in_the_chosen_zone(memory: Any, admin_user: User) -> None:
    client = csrf_client(admin_user)
    _choose(client, CHOSEN)
    html = client.get(reverse("event-list")).content.decode()
    event = Event.objects.order_by("-created_at").first()
    assert event is not None
    assert event.created_at.astimezone(ZoneInfo(CHOSEN)).strftime(FORMAT) in html
    assert event.created_at.astimezone(ZoneInfo(settings.TIME_ZONE)).strftime(FORMAT) not in html


def test_an_unknown_zone_is_refused_and_changes_nothing(reviewer: User) -> None:
    client = csrf_client(reviewer)
    response = _choose(client, "Mars/Olympus_Mons")
    assert response.status_code == 422
    assert "Select a valid choice" in response.content.decode()
    assert SESSION_KEY not in client.session


def test_an_empty_choice_returns_to_the_deployments_zone(reviewer: User) -> None:
    client = csrf_client(reviewer)
    _choose(client, CHOSEN)
    _choose(client, "")
    assert f"Times in {settings.TIME_ZONE}" in client.get("/").content.decode()


def test_the_return_address_stays_on_this_site(reviewer: User) -> None:
    client = csrf_client(reviewer)
    response = _choose(client, CHOSEN, next_url="https://elsewhere.example/")
    assert response["Location"] == "/"
    assert _choose(client, CHOSEN, next_url="/runs/")["Location"] == "/runs/"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("2026-10-01T04:00:00Z", "2026-10-01 00:00:00"),
        ("2026-10-01T12:00:00+08:00", "2026-10-01 00:00:00"),
        ("2026-10-01T04:00:00", "2026-10-01T04:00:00"),  # no offset: not an instant
        ("not a time", "not a time"),
        (None, ""),
    ],
)
def test_instants_kept_as_text_render_in_the_zone_too(text: object, shown: str) -> None:
    template = Template("{{ value|instant }}")
    with override(CHOSEN):
        assert template.render(Context({"value": text})) == shown
