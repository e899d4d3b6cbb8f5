"""Curation pages: full page and fragment inside a query budget, permissions, and the forms."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from curation import incidents, scan
from curation.models import (
    IncidentMerge,
    LinkStatus,
    NearDuplicate,
    ProposalStatus,
    ReReview,
    Thread,
)
from experience.cases.models import Case
from experience.core.models import Status
from reviewconsole.errors import PermissionRefused
from reviewconsole.models import Action, Event
from tests.curation.conftest import THREAD_ID, other_wording, thread_json
from tests.experience.conftest import NOW, SCOPE, case_data

HTMX = {"HX-Request": "true"}


def digest(item_id: str) -> str:
    return item_id.split(":", 1)[1]


@pytest.fixture
def world(
    thread: Thread,
    approve: Callable[..., Case],
    submit: Callable[..., Case],
    agent: User,
    operator: User,
    admin_user: User,
) -> dict[str, Any]:
    """A thread, two approved cases of distinct incidents sharing a pattern, an agent's similar
    proposal, and the queues filled by a scan."""
    first = approve(case_data(incident="INC-1"))
    second = approve(other_wording("INC-2"))
    proposed = submit(other_wording("INC-AGENT"), actor=agent, via="api")
    report = scan.curation_scan(now=NOW + timedelta(days=100), days=90)
    return {"first": first, "second": second, "proposed": proposed, "report": report}


def pages(world: dict[str, Any]) -> dict[str, str]:
    report = world["report"]
    return {
        "home": reverse("curation:home"),
        "threads": reverse("curation:thread-list"),
        "thread": reverse("curation:thread-detail", args=[THREAD_ID]),
        "similar": reverse("curation:case-similar", args=[digest(world["first"].id)]),
        "links": reverse("curation:link-list"),
        "incidents": reverse("curation:incident-list"),
        "rereview": reverse("curation:rereview-list"),
        "recertify": reverse("curation:rereview-recertify", args=[report.queued[0].pk]),
        "proposals": reverse("curation:proposal-list"),
        "proposal": reverse("curation:proposal-detail", args=[report.proposals[0].pk]),
    }


# (page, full-page queries, fragment queries or None when the page has no fragment, text)
PAGES = [
    ("home", 8, None, "Possibly the same incident"),
    ("threads", 6, 5, "二号店小程序优惠券无法使用"),
    # +2: the scope values offered in datalists (documents' and cases', one query each)
    ("thread", 11, None, "Submit candidate for review"),
    ("similar", 9, 8, "machine-proposed"),
    ("links", 6, 5, "Compare and decide"),
    ("incidents", 7, 4, "No incident ids merged yet."),  # +2: scope values (tenant, brand)
    ("rereview", 7, 6, "unused for too long"),  # +1: the items' availability (one per kind)
    ("recertify", 6, None, "Submit new version for review"),
    ("proposals", 6, 5, "缓存未刷新"),
    ("proposal", 7, None, "distinct incidents"),
]


@pytest.mark.parametrize(("page", "full", "fragment", "text"), PAGES)
def test_page_and_fragment(
    page: str,
    full: int,
    fragment: int | None,
    text: str,
    world: dict[str, Any],
    reviewer: User,
    client: Client,
    django_assert_num_queries: Any,
) -> None:
    url = pages(world)[page]
    client.force_login(reviewer)
    with django_assert_num_queries(full):
        response = client.get(url)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" in html and text in html
    if fragment is None:
        return
    with django_assert_num_queries(fragment):
        response = client.get(url, headers=HTMX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html and "HX-Request" in response["Vary"]


def test_pages_need_a_console_login(world: dict[str, Any], agent: User, client: Client) -> None:
    urls = pages(world)
    response = client.get(urls["similar"])
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    client.force_login(agent)
    assert client.get(urls["similar"]).status_code == 403


def test_threads_are_for_those_who_submit_cases(
    world: dict[str, Any], admin_user: User, client: Client
) -> None:
    client.force_login(admin_user)
    urls = pages(world)
    assert client.get(urls["threads"]).status_code == 403
    assert client.get(urls["similar"]).status_code == 200  # admins see, but decide nothing
    assert "Same incident" not in client.get(urls["similar"]).content.decode()


def build_post(**changes: str) -> dict[str, str]:
    data = {
        **SCOPE,
        "incident": "INC-0918",
        "title": "二号店优惠券无法使用：活动 B 门店范围漏配",
        "valid_from": "2026-09-18T00:00:00+08:00",
        "valid_to": "2027-09-18T00:00:00+08:00",
        "diagnosis": "活动 B 的适用门店列表不含二号店。",
        "counter-1-hypothesis": "客户端缓存未刷新",
        "counter-1-statement": "刷新和重新登录后仍失败。",
        "counter-1-refutes": "仅客户端缓存；服务端缓存未排除",
        "outcome": "补充门店后顾客可以下单。",
        "use__m1": "observation",
        "use__m8": "diagnosis",
        "excerpt__m8": "适用门店列表只有一号店和三号店，二号店漏配了",
        "use__m4": "counter-1",
        "use__m10": "outcome",
        "excerpt__m10": "好了，谢谢",
    }
    data.update(changes)
    return data


def test_the_build_page_starts_with_nothing_picked_or_concluded(
    thread: Thread, operator: User, client: Client
) -> None:
    client.force_login(operator)
    response = client.get(reverse("curation:thread-detail", args=[THREAD_ID]))
    form = response.context["form"]
    assert all(not form[name].value() for name in form.fields if name.startswith("use__"))
    for name in ("diagnosis", "outcome", "incident", "title", "counter-1-hypothesis"):
        assert not form[name].value()
    html = response.content.decode()
    assert "machine text" in html  # the agent's messages are marked as such
    assert "活动B门店配置.png" in html  # attachments are pickable as extracted text


def test_building_submits_a_candidate_and_goes_to_its_page(
    thread: Thread, operator: User, client: Client
) -> None:
    client.force_login(operator)
    response = client.post(reverse("curation:thread-build", args=[THREAD_ID]), build_post())
    case = Case.objects.get()
    assert response.status_code == 303
    assert response["Location"] == reverse("experience:case-detail", args=[digest(case.id)])
    assert case.status == Status.CANDIDATE and case.submitted_by == operator
    assert case.evidence_items.get(key="diagnosis/0").source_id == f"thread:{THREAD_ID}#m8"
    assert Event.objects.filter(action=Action.THREAD_BUILD, target=case.id).exists()


def test_a_refused_build_shows_the_error_at_its_field_and_stores_nothing(
    thread: Thread, operator: User, client: Client
) -> None:
    client.force_login(operator)
    url = reverse("curation:thread-build", args=[THREAD_ID])
    response = client.post(url, build_post(excerpt__m10="缓存刷新后就好了"))
    assert response.status_code == 422
    assert response.context["form"].errors["excerpt__m10"]
    response = client.post(url, build_post(store="unknown"))
    assert response.status_code == 422 and response.context["form"].errors["store"]
    response = client.post(url, build_post(valid_to="18 Sept 2027"))
    assert response.status_code == 422 and "not a date and time" in str(
        response.context["form"].errors["valid_to"]
    )
    assert not Case.objects.exists()


def test_the_preview_is_a_fragment_that_stores_nothing(
    thread: Thread, operator: User, client: Client
) -> None:
    client.force_login(operator)
    url = reverse("curation:thread-preview", args=[THREAD_ID])
    response = client.post(url, build_post(), headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and "<html" not in html
    assert 'id="candidate-preview"' in html and f"thread:{THREAD_ID}#m8" in html
    assert not Case.objects.exists()
    response = client.post(url, build_post())  # without htmx: the whole page with the preview
    assert (
        "<html" in response.content.decode()
        and f"thread:{THREAD_ID}#m8" in response.content.decode()
    )


def test_a_thread_file_is_imported_from_the_page(
    operator: User, client: Client, at_now: datetime
) -> None:
    import json

    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(operator)
    upload = SimpleUploadedFile("t.json", json.dumps(thread_json()).encode(), "application/json")
    response = client.post(reverse("curation:thread-list"), {"file": upload})
    assert response.status_code == 303
    assert response["Location"] == Thread.objects.get().get_absolute_url()
    broken = SimpleUploadedFile("t.json", b'{"id": "x", "tenant": "teahouse"}', "application/json")
    response = client.post(reverse("curation:thread-list"), {"file": broken})
    assert response.status_code == 422 and "title" in response.context["import_error"]


def test_a_reviewer_records_one_incident_from_the_similar_page(
    world: dict[str, Any], second_reviewer: User, client: Client
) -> None:
    first, second = world["first"], world["second"]
    link = NearDuplicate.objects.get(case_a__in=[first, second], case_b__in=[first, second])
    back = reverse("curation:case-similar", args=[digest(first.id)])
    client.force_login(second_reviewer)
    response = client.post(
        reverse("curation:link-resolve", args=[link.pk]),
        {"decision": "same_incident", "canonical": "INC-1", "reason": "同一配置错误", "next": back},
    )
    assert response.status_code == 303 and response["Location"] == back
    link.refresh_from_db()
    assert link.status == LinkStatus.SAME_INCIDENT
    assert IncidentMerge.objects.get().alias == "INC-2"
    html = client.get(back).content.decode()
    assert "2 summaries, counted as one incident" in html


def test_an_open_redirect_is_not_followed(
    world: dict[str, Any], second_reviewer: User, client: Client
) -> None:
    link = NearDuplicate.objects.first()
    assert link is not None
    client.force_login(second_reviewer)
    response = client.post(
        reverse("curation:link-resolve", args=[link.pk]),
        {"decision": "different", "reason": "x", "next": "https://evil.example/"},
    )
    assert response["Location"] == reverse("curation:case-similar", args=[digest(link.case_a_id)])


def test_operators_cannot_decide_incidents(
    world: dict[str, Any], operator: User, client: Client
) -> None:
    link = NearDuplicate.objects.first()
    assert link is not None
    client.force_login(operator)
    response = client.post(
        reverse("curation:link-resolve", args=[link.pk]), {"decision": "different", "reason": "x"}
    )
    assert response.status_code == 403
    response = client.post(
        reverse("curation:incident-list"),
        {
            "tenant": "teahouse",
            "brand": "leaf-and-cup",
            "alias": "INC-2",
            "into": "INC-1",
            "reason": "x",
        },
    )
    assert response.status_code == 403
    assert not IncidentMerge.objects.exists()


def test_a_merge_from_the_incident_page(
    world: dict[str, Any], second_reviewer: User, client: Client
) -> None:
    client.force_login(second_reviewer)
    url = reverse("curation:incident-list")
    data = {
        "tenant": "teahouse",
        "brand": "leaf-and-cup",
        "alias": "INC-2",
        "into": "INC-1",
        "reason": "",
    }
    assert client.post(url, data).status_code == 422
    response = client.post(url, {**data, "reason": "同一事故"})
    assert response.status_code == 303
    assert "INC-2" in client.get(url).content.decode()


def test_recertify_from_the_queue(
    world: dict[str, Any], operator: User, client: Client, frozen_clock: Callable[[datetime], Any]
) -> None:
    frozen_clock(NOW + timedelta(days=100))
    entry = ReReview.objects.filter(item_id=world["first"].id).get()
    client.force_login(operator)
    url = reverse("curation:rereview-recertify", args=[entry.pk])
    form = client.get(url).context["form"]
    response = client.post(
        url, {"valid_from": form["valid_from"].value(), "valid_to": form["valid_to"].value()}
    )
    new = Case.objects.get(supersedes=world["first"].id)
    assert response.status_code == 303
    assert response["Location"] == reverse("experience:case-detail", args=[digest(new.id)])
    assert "New version" in client.get(reverse("curation:rereview-list")).content.decode()


def test_a_skill_entry_is_confirmed_from_the_queue(
    world: dict[str, Any], second_reviewer: User, client: Client
) -> None:
    entry = ReReview.objects.filter(item_id=world["first"].id).get()
    client.force_login(second_reviewer)
    response = client.post(reverse("curation:rereview-confirm", args=[entry.pk]), {"reason": "ok"})
    assert response.status_code == 303
    entry.refresh_from_db()
    assert entry.status == "open"  # a case is never confirmed, only re-certified


def test_adopt_and_dismiss_proposals_from_the_page(
    world: dict[str, Any], reviewer: User, second_reviewer: User, client: Client
) -> None:
    proposal = world["report"].proposals[0]
    client.force_login(reviewer)
    url = reverse("curation:proposal-adopt", args=[proposal.pk])
    response = client.post(url, {"title": "t", "when": "w", "query_1": ""})
    assert response.status_code == 422
    response = client.post(
        url, {"title": "排查缓存", "when": "优惠券不可用时", "query_1": "优惠券无法使用的适用条件"}
    )
    assert response.status_code == 303
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.ADOPTED
    assert response["Location"] == reverse(
        "experience:skill-detail", args=[digest(proposal.skill_id)]
    )

    support = reverse("curation:skill-support", args=[digest(proposal.skill_id)])
    html = client.get(support).content.decode()
    assert "2 distinct incidents" in html
    fragment = client.get(support, headers=HTMX).content.decode()
    assert 'id="support-panel"' in fragment and "<html" not in fragment


def test_the_machine_marker_is_shown_for_agent_proposals(
    world: dict[str, Any], reviewer: User, client: Client
) -> None:
    client.force_login(reviewer)
    proposed = world["proposed"]
    html = client.get(reverse("curation:case-similar", args=[digest(proposed.id)])).content.decode()
    assert "machine-proposed" in html
    html = client.get(
        reverse("curation:case-similar", args=[digest(world["first"].id)])
    ).content.decode()
    assert html.count("machine-proposed") == 1  # only next to the agent's case


def test_a_reviewer_of_another_tenant_sees_and_decides_nothing_here(
    world: dict[str, Any], client: Client
) -> None:
    from reviewconsole.roles import Role
    from reviewconsole.services import user_set_role
    from tests.conftest import PASSWORD

    outsider = user_set_role(
        username="otto", role=Role.REVIEWER, password=PASSWORD, tenants=["other-tenant"]
    )
    client.force_login(outsider)
    urls = pages(world)
    assert client.get(urls["similar"]).status_code == 404
    assert client.get(urls["proposal"]).status_code == 404
    assert client.get(urls["recertify"]).status_code == 404
    assert "No pair waits for a decision." in client.get(urls["links"]).content.decode()
    assert "Nothing needs re-review." in client.get(urls["rereview"]).content.decode()
    link = NearDuplicate.objects.first()
    assert link is not None
    response = client.post(
        reverse("curation:link-resolve", args=[link.pk]), {"decision": "different", "reason": "x"}
    )
    assert response.status_code == 404
    link.refresh_from_db()
    assert link.status == LinkStatus.OPEN
    with pytest.raises(PermissionRefused):
        incidents.incident_merge(
            tenant="teahouse",
            brand="leaf-and-cup",
            alias="INC-2",
            into="INC-1",
            actor=outsider,
            reason="not mine",
        )


def test_the_similar_panel_embedded_in_a_case_page_returns_there(
    world: dict[str, Any], reviewer: User, client: Client
) -> None:
    first = world["first"]
    case_page = reverse("experience:case-detail", args=[digest(first.id)])
    client.force_login(reviewer)
    fragment = client.get(
        reverse("curation:case-similar", args=[digest(first.id)]),
        headers={**HTMX, "HX-Current-URL": f"http://testserver{case_page}"},
    ).content.decode()
    assert 'id="similar-panel"' in fragment
    assert f'name="next" value="{case_page}"' in fragment
