"""The console shell: login, dashboard counts, the audit log and its CSV export, languages."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any, cast

from django.contrib.auth.models import User
from django.db import transaction
from django.http import StreamingHttpResponse
from django.test import Client
from django.urls import reverse

from experience.cases.models import Case
from reviewconsole import clock
from reviewconsole.audit import event_record
from reviewconsole.models import Action
from tests.conftest import PASSWORD
from tests.ui.factories import submit_case


def test_login_page_and_login(reviewer: User, client: Client) -> None:
    page = client.get(reverse("login"))
    assert page.status_code == 200 and 'for="id_username"' in page.content.decode()
    wrong = client.post(reverse("login"), {"username": "rita", "password": "nope"})
    assert wrong.status_code == 200 and 'role="alert"' in wrong.content.decode()
    response = client.post(reverse("login"), {"username": "rita", "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == reverse("home")


def test_dashboard_counts(
    memory: dict[str, Any], candidate: Case, operator: User, reviewer: User, client: Client
) -> None:
    # Expiring within 30 days, but not in the re-review queue: the card counts the queue only.
    from tests.ui.factories import approved_case

    approved_case(
        submitter=operator,
        reviewer=reviewer,
        incident="INC-SOON",
        valid_to=(clock.now() + timedelta(days=10)).isoformat(),
    )
    client.force_login(reviewer)
    counts = client.get(reverse("home")).context["counts"]
    # The candidate, and the after-action review drafted from the fixture's skill run (a case
    # and a lesson: the card counts what the queue it opens lists, lessons included).
    assert counts.candidates == 3
    assert counts.recently_approved == 4  # three cases and the skill
    assert counts.recently_revoked == 0
    assert counts.due_for_rereview == 0
    assert counts.draft_documents == 0


def test_due_for_rereview_counts_the_rereview_queue(
    operator: User, reviewer: User, client: Client, frozen_clock: Any
) -> None:
    """The card counts what the re-review queue lists: a long-unused item once the curation
    scan has queued it (the scan holds the rule; the dashboard does not repeat it)."""
    from curation.scan import curation_scan
    from tests.ui.factories import approved_case

    start = clock.now()
    frozen_clock(start)
    approved_case(submitter=operator, reviewer=reviewer, incident="INC-OLD")
    frozen_clock(start + timedelta(days=120))
    client.force_login(reviewer)
    assert client.get(reverse("home")).context["counts"].due_for_rereview == 0
    curation_scan()
    counts = client.get(reverse("home")).context["counts"]
    queue = client.get(reverse("curation:rereview-list")).context["page_obj"].paginator.count
    assert counts.due_for_rereview == queue == 1


def _events(actor: User, count: int) -> None:
    with transaction.atomic():
        for index in range(count):
            event_record(
                actor=actor,
                action=Action.LEXICON_CHANGE,
                target=f"synonym:t{index}",
                reason=f"r{index}",
            )


def test_audit_filters_and_pagination(admin_user: User, operator: User, client: Client) -> None:
    _events(operator, 60)
    client.force_login(admin_user)
    first = client.get(reverse("event-list") + "?action=knowledge.lexicon.change")
    assert first.context["page_obj"].paginator.count == 60
    assert len(first.context["events"]) == 50
    assert "?action=knowledge.lexicon.change&amp;page=2" in first.content.decode()
    second = client.get(reverse("event-list") + "?action=knowledge.lexicon.change&page=2")
    assert len(second.context["events"]) == 10
    by_target = client.get(reverse("event-list") + "?target=synonym:t59&actor=olivia")
    assert [e.target for e in by_target.context["events"]] == ["synonym:t59"]
    nobody = client.get(reverse("event-list") + "?actor=ravi")
    assert nobody.context["page_obj"].paginator.count == 0


def test_audit_date_range_is_whole_days_in_the_console_zone(
    admin_user: User, operator: User, client: Client, frozen_clock: Any
) -> None:
    from datetime import datetime

    frozen_clock(datetime.fromisoformat("2026-09-18T23:30:00+08:00"))
    _events(operator, 1)
    frozen_clock(datetime.fromisoformat("2026-09-19T00:30:00+08:00"))
    _events(operator, 2)
    client.force_login(admin_user)
    day = client.get(
        reverse("event-list")
        + "?date_from=2026-09-18&date_to=2026-09-18&action=knowledge.lexicon.change"
    )
    assert day.context["page_obj"].paginator.count == 1
    bad = client.get(reverse("event-list") + "?date_from=2026-09-19&date_to=2026-09-18")
    assert "must not be before the start date" in bad.content.decode()


def test_audit_csv_export_streams_filtered_rows(
    admin_user: User, operator: User, client: Client
) -> None:
    _events(operator, 3)
    with transaction.atomic():
        event_record(
            actor=operator, action=Action.LEXICON_CHANGE, target="synonym:x", reason="=HYPERLINK(1)"
        )
    client.force_login(admin_user)
    response = client.get(reverse("event-export") + "?action=knowledge.lexicon.change")
    assert response.streaming
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="audit-')
    body = b"".join(cast(StreamingHttpResponse, response).streaming_content)  # type: ignore[arg-type]
    rows = list(csv.reader(io.StringIO(body.decode())))
    # Times in the zone the page shows (the deployment's here), named in the header.
    assert rows[0] == ["time (Asia/Shanghai)", "actor", "action", "target", "reason", "details"]
    assert all(row[0].endswith("+08:00") for row in rows[1:])
    assert len(rows) == 5
    assert rows[1][4] == "'=HYPERLINK(1)"  # a spreadsheet must not run user text as a formula
    assert {row[2] for row in rows[1:]} == {"knowledge.lexicon.change"}


def test_chinese_from_the_browser_and_the_switcher(
    candidate: Case, reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    chinese = client.get(
        reverse("experience:queue"), HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9"
    ).content.decode()
    assert '<html lang="zh-hans">' in chinese and "审核队列" in chinese and "候选" in chinese
    response = client.post(
        reverse("set_language"), {"language": "zh-hans", "next": reverse("home")}
    )
    assert response.status_code == 302
    assert "仪表盘" in client.get(reverse("home")).content.decode()
    client.post(reverse("set_language"), {"language": "en", "next": reverse("home")})
    assert "Dashboard" in client.get(reverse("home")).content.decode()


def test_case_page_in_chinese_names_the_unmet_conditions(
    operator: User, reviewer: User, client: Client
) -> None:
    case = submit_case(operator, incident="INC-ZH")
    client.force_login(reviewer)
    html = client.get(
        reverse("experience:case-detail", args=[case.id.split(":", 1)[1]]),
        HTTP_ACCEPT_LANGUAGE="zh-hans",
    ).content.decode()
    assert "审批清单" in html and "no_checked_diagnosis_evidence" in html


def test_audit_csv_export_uses_the_users_chosen_zone(
    admin_user: User, operator: User, client: Client
) -> None:
    _events(operator, 1)
    client.force_login(admin_user)
    client.post(reverse("time-zone"), {"zone": "Europe/Berlin"})
    response = client.get(reverse("event-export"))
    body = b"".join(cast(StreamingHttpResponse, response).streaming_content)  # type: ignore[arg-type]
    rows = list(csv.reader(io.StringIO(body.decode())))
    assert rows[0][0] == "time (Europe/Berlin)"
    assert rows[1][0].endswith(("+01:00", "+02:00"))
