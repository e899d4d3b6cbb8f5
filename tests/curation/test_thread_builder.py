"""The thread builder starts from the thread's scope, offers existing scope values, reads times
in the console's time zone, and keeps the preview beside the picker."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from curation import threads
from curation.domain.threads import parse_thread
from curation.models import Thread
from experience.cases.models import Case
from reviewconsole.errors import ValidationFailure
from reviewconsole.services import user_set_role
from tests.conftest import PASSWORD
from tests.curation.conftest import THREAD_ID, thread_json
from tests.curation.test_views import build_post

pytestmark = pytest.mark.django_db

GIVEN = {"brand": "leaf-and-cup", "store": "store-002", "campaign": "campaign-b"}


def field_value(html: str, name: str) -> str | None:
    match = re.search(rf'<input[^>]*name="{name}"[^>]*>', html)
    assert match, name
    value = re.search(r'value="([^"]*)"', match.group(0))
    return value.group(1) if value else None


def test_a_thread_may_say_where_it_happened_and_a_bad_value_is_refused_by_path() -> None:
    content = parse_thread({**thread_json(), "scope": GIVEN})
    assert dict(content.scope) == GIVEN
    # Without a scope a thread hashes as before; with one, its hash differs.
    assert parse_thread(thread_json()).content_hash != content.content_hash
    for bad, path in (
        ({"store": "any"}, "scope.store"),
        ({"tenant": "teahouse"}, "scope.tenant"),
        ({"store": ""}, "scope.store"),
    ):
        with pytest.raises(ValidationFailure) as failure:
            parse_thread({**thread_json(), "scope": bad})
        assert failure.value.field == path
    with pytest.raises(ValidationFailure) as failure:
        parse_thread({**thread_json(), "scope": ["store-002"]})
    assert failure.value.field == "scope"


def test_the_builder_starts_from_the_thread_scope(
    operator: User, client: Client, at_now: datetime
) -> None:
    threads.thread_import(data={**thread_json(), "scope": GIVEN}, actor=operator)
    client.force_login(operator)
    html = client.get(reverse("curation:thread-detail", args=[THREAD_ID])).content.decode()
    assert field_value(html, "tenant") == "teahouse"
    for name, value in GIVEN.items():
        assert field_value(html, name) == value
    assert field_value(html, "deployment") is None  # the thread did not say: left to the operator
    # Valid from starts at the first message, shown in the console's zone for a local input.
    assert field_value(html, "valid_from") == "2026-09-18T14:02"
    assert 'type="datetime-local"' in html and "Time zone: Asia/Shanghai" in html
    # The zone is the input's description (its help text), not only text nearby.
    assert 'aria-describedby="id_valid_from_helptext"' in html
    assert 'id="id_valid_from_helptext">Time zone: Asia/Shanghai<' in html


def test_without_a_thread_scope_the_builder_takes_a_built_candidate_scope(
    operator: User, client: Client, at_now: datetime
) -> None:
    threads.thread_import(data=thread_json(), actor=operator)
    client.force_login(operator)
    url = reverse("curation:thread-detail", args=[THREAD_ID])
    assert field_value(client.get(url).content.decode(), "store") is None
    build = reverse("curation:thread-build", args=[THREAD_ID])
    assert client.post(build, build_post()).status_code == 303
    html = client.get(url).content.decode()
    assert field_value(html, "store") == "store-002"
    assert field_value(html, "deployment") == "release-1"


def test_a_time_without_offset_is_read_in_the_console_zone(
    operator: User, client: Client, at_now: datetime
) -> None:
    threads.thread_import(data=thread_json(), actor=operator)
    client.force_login(operator)
    build = reverse("curation:thread-build", args=[THREAD_ID])
    response = client.post(
        build, build_post(valid_from="2026-09-18T08:30", valid_to="2027-09-18T00:00")
    )
    assert response.status_code == 303
    case = Case.objects.get()
    shanghai = ZoneInfo("Asia/Shanghai")
    assert case.valid_from == datetime(2026, 9, 18, 8, 30, tzinfo=shanghai)
    assert case.valid_to == datetime(2027, 9, 18, tzinfo=shanghai)


def test_scope_fields_offer_only_values_the_user_may_see(
    operator: User, client: Client, at_now: datetime, make_user: Any
) -> None:
    threads.thread_import(data=thread_json(), actor=operator)
    client.force_login(operator)
    build = reverse("curation:thread-build", args=[THREAD_ID])
    assert client.post(build, build_post()).status_code == 303
    other_thread = {**thread_json(), "id": "T-other", "tenant": "other-tenant"}
    threads.thread_import(data=other_thread, actor=operator)
    other = reverse("curation:thread-build", args=["T-other"])
    response = client.post(
        other, build_post(tenant="other-tenant", store="store-secret", incident="INC-X")
    )
    assert response.status_code == 303

    html = client.get(reverse("curation:thread-detail", args=[THREAD_ID])).content.decode()
    assert 'list="id_store-options"' in html
    stores = re.search(r'<datalist id="id_store-options">(.*?)</datalist>', html, re.S)
    assert stores and 'value="store-002"' in stores.group(1)
    assert 'value="store-secret"' in stores.group(1)  # deployment-wide operator sees both

    limited = user_set_role(
        username="tina", role="operator", password=PASSWORD, tenants=["teahouse"]
    )
    client.force_login(limited)
    html = client.get(reverse("curation:thread-detail", args=[THREAD_ID])).content.decode()
    stores = re.search(r'<datalist id="id_store-options">(.*?)</datalist>', html, re.S)
    assert stores and 'value="store-002"' in stores.group(1)
    assert "store-secret" not in html and "other-tenant" not in html


def test_the_preview_sits_beside_the_form_and_its_buttons_submit_the_form(
    operator: User, client: Client, at_now: datetime
) -> None:
    threads.thread_import(data=thread_json(), actor=operator)
    client.force_login(operator)
    html = client.get(reverse("curation:thread-detail", args=[THREAD_ID])).content.decode()
    form_end = html.index("</form>", html.index('id="candidate-form"'))
    aside = html.index('class="thread-builder-aside"')
    assert form_end < aside < html.index('id="candidate-preview"')
    buttons = re.findall(r"<button[^>]*>", html[aside:])
    assert buttons and all('form="candidate-form"' in b for b in buttons[:2])
    assert Thread.objects.count() == 1


def test_later_counterevidence_entries_fold_away_until_they_hold_something(
    operator: User, client: Client, at_now: datetime
) -> None:
    threads.thread_import(data=thread_json(), actor=operator)
    client.force_login(operator)
    html = client.get(reverse("curation:thread-detail", args=[THREAD_ID])).content.decode()
    entries = re.findall(r'<details class="counter-entry"( open)?>', html)
    assert entries == [" open", "", ""]
    preview = reverse("curation:thread-preview", args=[THREAD_ID])
    html = client.post(preview, build_post(**{"counter-3-hypothesis": "券已过期"})).content.decode()
    entries = re.findall(r'<details class="counter-entry"( open)?>', html)
    assert entries == [" open", "", " open"]


def test_a_missing_field_is_named_by_its_label_and_marked_required(
    operator: User, client: Client, at_now: datetime
) -> None:
    threads.thread_import(data=thread_json(), actor=operator)
    client.force_login(operator)
    html = client.get(reverse("curation:thread-detail", args=[THREAD_ID])).content.decode()
    label = re.search(r'<label for="id_valid_to">(.*?)</label>', html, flags=re.S)
    assert label and 'class="required-mark"' in label.group(1)
    preview = reverse("curation:thread-preview", args=[THREAD_ID])
    html = client.post(preview, build_post(valid_to="")).content.decode()
    assert '<a href="#id_valid_to">Valid to</a>: This field is required.' in html
    assert "<code>valid_to</code>" not in html and "valid_to:" not in html
