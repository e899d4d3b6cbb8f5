"""The console's investigation pages: login, permission, CSRF, full page and htmx fragment."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from investigations.domain import ToolCall
from investigations.models import Investigation, InvestigationRequest, RequestState
from knowledge.conclusions import RULES_EXCLUDE_PURCHASE
from knowledge.domain import HISTORICAL_CASE_PREFIX
from reviewconsole.models import TenantMembership

pytestmark = pytest.mark.django_db

NEW = reverse("investigations:investigation-new")
HTMX = {"HX-Request": "true"}


def form(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "text": "两杯水果茶，优惠券用不了",
        "tenant": "teahouse",
        "brand": "leaf-and-cup",
        "store": "store-001",
        "campaign": "campaign-a",
        "deployment": "release-1",
        "occurred_at": "2026-09-18T14:00:00",
        "known_at": "2026-09-18T14:10:00",
        "timezone": "Asia/Shanghai",
        "channel": "miniapp",
        "product": "fruit-tea",
        "basket_cents": "3200",
        "extra_facts": "",
    }
    data.update(changes)
    return data


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_anonymous_is_sent_to_login() -> None:
    response = Client().get(NEW)
    assert response.status_code == 302
    assert reverse("login") in response["Location"]


def test_an_agent_gets_403(agent: User) -> None:
    assert signed_in(agent).get(NEW).status_code == 403
    assert signed_in(agent).post(NEW, form()).status_code == 403


def test_an_admin_reads_investigations_but_may_not_investigate(
    knowledge_base: None, reviewer: User, admin_user: User
) -> None:
    signed_in(reviewer).post(NEW, form())
    investigation = Investigation.objects.get()
    client = signed_in(admin_user)

    listing = client.get(NEW)
    assert listing.status_code == 200
    body = listing.content.decode()
    assert investigation.run_id in body  # the recent investigations, to audit
    assert 'name="text"' not in body  # but no form
    assert client.post(NEW, form()).status_code == 403
    assert client.get(investigation.get_absolute_url()).status_code == 200
    assert Investigation.objects.count() == 1


@pytest.mark.parametrize("role", ["reviewer", "operator"])
def test_a_reviewer_or_operator_sees_the_form(
    role: str, request: pytest.FixtureRequest, django_assert_max_num_queries: Any
) -> None:
    client = signed_in(request.getfixturevalue(role))
    with django_assert_max_num_queries(12):
        response = client.get(NEW)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'name="text"' in body and 'name="deployment"' in body
    assert "csrfmiddlewaretoken" in body


def test_a_post_without_the_csrf_token_is_refused(knowledge_base: None, reviewer: User) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    assert client.post(NEW, form()).status_code == 403
    assert not Investigation.objects.exists()


def test_a_posted_ticket_is_investigated_and_shown(knowledge_base: None, reviewer: User) -> None:
    client = signed_in(reviewer)
    response = client.post(NEW, form())

    investigation = Investigation.objects.get()
    queued = InvestigationRequest.objects.get()
    assert response.status_code == 303
    # The browser follows the run; once it is stored, the run's page leads to it.
    assert response["Location"] == queued.get_absolute_url()
    assert queued.state == RequestState.FINISHED and queued.investigation == investigation
    assert queued.run_id == investigation.run_id
    followed = client.get(queued.get_absolute_url())
    assert followed.status_code == 302
    assert followed["Location"] == investigation.get_absolute_url()
    assert investigation.actor == reviewer
    assert investigation.answer is not None
    assert investigation.answer["conclusion_code"] == RULES_EXCLUDE_PURCHASE

    page = client.get(investigation.get_absolute_url()).content.decode()
    assert f'data-code="{RULES_EXCLUDE_PURCHASE}"' in page
    assert "A rule&#x27;s conditions exclude this purchase" in page
    # Each citation links to its evidence, and the case keeps its prefix.
    assert reverse("knowledge:document-detail", args=["rule-a", 2]) in page
    assert reverse("knowledge:document-detail", args=["case-a", 1]) in page
    assert HISTORICAL_CASE_PREFIX in page


def test_an_htmx_post_answers_with_the_result_fragment(
    knowledge_base: None, reviewer: User
) -> None:
    response = signed_in(reviewer).post(NEW, form(), headers=HTMX)

    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="investigation-result"')
    assert "<html" not in body
    assert RULES_EXCLUDE_PURCHASE in body


def test_a_bad_form_is_422_and_writes_nothing(knowledge_base: None, reviewer: User) -> None:
    response = signed_in(reviewer).post(NEW, form(text=""), headers=HTMX)
    assert response.status_code == 422
    assert response["HX-Retarget"] == "#investigation-form"
    assert not Investigation.objects.exists()
    assert not InvestigationRequest.objects.exists()


def test_a_tenant_the_user_may_not_see_is_refused_on_the_form(
    knowledge_base: None, make_user: Callable[[str, str], User]
) -> None:
    limited = make_user("limited-reviewer", "reviewer")
    TenantMembership.objects.create(user=limited, tenant="other-tenant")
    response = signed_in(limited).post(NEW, form())
    assert response.status_code == 422
    assert not Investigation.objects.exists()


def test_the_detail_page_is_a_page_and_a_fragment(
    knowledge_base: None, reviewer: User, django_assert_max_num_queries: Any
) -> None:
    client = signed_in(reviewer)
    client.post(NEW, form())
    url = Investigation.objects.get().get_absolute_url()
    with django_assert_max_num_queries(10):
        full = client.get(url)
    fragment = client.get(url, headers=HTMX)
    assert full.status_code == fragment.status_code == 200
    assert "<html" in full.content.decode()
    assert "<html" not in fragment.content.decode()


def test_another_tenants_investigation_is_404(
    knowledge_base: None, reviewer: User, make_user: Callable[[str, str], User]
) -> None:
    signed_in(reviewer).post(NEW, form())
    limited = make_user("limited-reviewer", "reviewer")
    TenantMembership.objects.create(user=limited, tenant="other-tenant")
    url = Investigation.objects.get().get_absolute_url()
    assert signed_in(limited).get(url).status_code == 404


def test_the_search_preview_names_the_allowed_conclusion(
    knowledge_base: None, operator: User
) -> None:
    from urllib.parse import urlencode

    params = {
        "query": "两杯水果茶，优惠券用不了",
        "tenant": "teahouse",
        "brand": "leaf-and-cup",
        "store": "store-001",
        "campaign": "campaign-a",
        "occurred_at": "2026-09-18T14:00",
        "known_at": "2026-09-18T14:10",
        "timezone": "Asia/Shanghai",
        "channel": "miniapp",
        "product": "fruit-tea",
        "basket_cents": "3200",
        "limit": "4",
    }
    url = reverse("knowledge:search-preview") + "?" + urlencode(params)
    html = signed_in(operator).get(url).content.decode()
    assert f"<code>{RULES_EXCLUDE_PURCHASE}</code>" in html  # the rule's mismatch
    assert "<code>lead_needs_review</code>" in html  # the historical case: a lead


def test_the_admin_lists_investigations_read_only(knowledge_base: None) -> None:
    from django.contrib import admin

    model_admin = admin.site._registry[Investigation]
    superuser = User.objects.create_superuser("root", password="x")
    client = signed_in(superuser)
    response = client.get(reverse("admin:investigations_investigation_changelist"))
    assert response.status_code == 200
    request = response.wsgi_request
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)


def test_a_refused_answer_shows_its_reasons(knowledge_base: None, reviewer: User) -> None:
    from datetime import datetime

    from investigations.domain import Transcript, Turn
    from investigations.services import investigation_run

    class DropsThePrefix:
        name = "hostile"

        def next_turn(self, transcript: Transcript) -> Turn:
            if not transcript.rounds:
                return Turn(calls=(ToolCall("c1", "search_knowledge", '{"query": "券用不了"}'),))
            case = next(
                item
                for item in transcript.rounds[0].exchanges[0].content["evidence"]
                if item["kind"] == "case"
            )
            quote = case["quote"].removeprefix(HISTORICAL_CASE_PREFIX + "：")
            return Turn(
                answer=json.dumps(
                    {
                        "conclusion": "Same cause as last time.",
                        "conclusion_code": "lead_needs_review",
                        "followups": [],
                        "citations": [{"id": case["id"], "quote": quote}],
                    }
                )
            )

    investigation = investigation_run(
        actor=reviewer,
        text="两杯水果茶，优惠券用不了",
        scope={
            "tenant": "teahouse",
            "brand": "leaf-and-cup",
            "store": "store-001",
            "campaign": "campaign-a",
            "deployment": "release-1",
        },
        occurred_at=datetime.fromisoformat("2026-09-18T14:00:00+08:00"),
        known_at=datetime.fromisoformat("2026-09-18T14:10:00+08:00"),
        facts={"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200},
        provider_instance=DropsThePrefix(),
    )
    page = signed_in(reviewer).get(investigation.get_absolute_url()).content.decode()
    # The refusal reads as a sentence for people, the code kept in its tooltip.
    assert 'title="missing_case_prefix" data-code="missing_case_prefix"' in page
    assert "leaves out its prefix" in page
    assert "<code>missing_case_prefix</code>" not in page
    assert "badge-refused" in page


def test_citations_and_returned_evidence_show_their_titles(
    knowledge_base: None, reviewer: User
) -> None:
    """A citation reads as the cited document's title (linked to its page), not as its id."""
    client = signed_in(reviewer)
    client.post(NEW, form())
    investigation = Investigation.objects.get()
    page = client.get(investigation.get_absolute_url()).content.decode()
    cited = page[page.index('class="citations"') : page.index('id="steps-heading"')]
    steps = page[page.index('id="steps-heading"') :]
    rule = reverse("knowledge:document-detail", args=["rule-a", 2])
    assert f'<a href="{rule}" title="doc:rule-a@2">活动A优惠券使用条件</a>' in cited
    case = reverse("knowledge:document-detail", args=["case-a", 1])
    assert f'<a href="{case}" title="doc:case-a@1">A店两杯水果茶优惠券无法使用</a>' in steps


OVERCLAIM = "Root cause confirmed; tell the customer it is fixed."


class Overclaims:
    """Cites the rule correctly, with prose that claims far more than the rule allows."""

    name = "overclaims"

    def next_turn(self, transcript: Any) -> Any:
        from investigations.domain import Turn

        if not transcript.rounds:
            return Turn(calls=(ToolCall("c1", "search_knowledge", '{"query": "券用不了"}'),))
        rule = next(
            item
            for item in transcript.rounds[0].exchanges[0].content["evidence"]
            if item["kind"] == "rule"
        )
        answer = {
            "conclusion": OVERCLAIM,
            "conclusion_code": "rules_exclude_purchase",
            "followups": [],
            "citations": [{"id": rule["id"], "quote": rule["quote"]}],
        }
        return Turn(answer=json.dumps(answer))


def _overclaimed(reviewer: User) -> Investigation:
    from datetime import datetime

    from investigations.services import investigation_run

    return investigation_run(
        actor=reviewer,
        text="两杯水果茶，优惠券用不了",
        scope={
            "tenant": "teahouse",
            "brand": "leaf-and-cup",
            "store": "store-001",
            "campaign": "campaign-a",
            "deployment": "release-1",
        },
        occurred_at=datetime.fromisoformat("2026-09-18T14:00:00+08:00"),
        known_at=datetime.fromisoformat("2026-09-18T14:10:00+08:00"),
        facts={"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200},
        provider_instance=Overclaims(),
    )


def _between(page: str, start: str, end: str) -> str:
    return page[page.index(start) : page.index(end, page.index(start))]


def test_the_page_states_the_composed_conclusion_and_marks_the_models_words(
    knowledge_base: None, reviewer: User
) -> None:
    investigation = _overclaimed(reviewer)
    assert investigation.status == "answered"

    page = signed_in(reviewer).get(investigation.get_absolute_url()).content.decode()
    conclusion = _between(page, 'class="conclusion"', "</dd>")
    assert "A rule&#x27;s conditions exclude this purchase" in conclusion
    assert reverse("knowledge:document-detail", args=["rule-a", 2]) in conclusion
    assert "confirmed" not in conclusion and "fixed" not in conclusion
    model = _between(page, 'class="model-text"', "</dd>")
    assert "Unverified: written by the model" in model
    assert "Root cause confirmed; tell the customer it is fixed." in model


def test_an_answer_stored_before_composition_shows_its_prose_as_the_models_words(
    knowledge_base: None, reviewer: User
) -> None:
    investigation = _overclaimed(reviewer)
    assert investigation.answer is not None
    legacy = {**investigation.answer, "conclusion": OVERCLAIM}
    del legacy["model_text"]
    Investigation.objects.filter(pk=investigation.pk).update(answer=legacy)

    page = signed_in(reviewer).get(investigation.get_absolute_url()).content.decode()
    assert "fixed" not in _between(page, 'class="conclusion"', "</dd>")
    assert "tell the customer it is fixed" in _between(page, 'class="model-text"', "</dd>")


def test_the_steps_show_arguments_and_results_as_text_not_python(
    knowledge_base: None, reviewer: User
) -> None:
    client = signed_in(reviewer)
    client.post(NEW, form())
    investigation = Investigation.objects.get()
    page = client.get(investigation.get_absolute_url()).content.decode()
    query = investigation.steps[0]["arguments"]["query"]
    assert f"query: {query}" in page
    assert "{&#x27;" not in page and "{'" not in page  # no dict in Python's notation
    assert "&quot;status&quot;:" in page  # the full result as JSON


def test_a_missing_scope_field_is_named_as_the_form_labels_it(
    knowledge_base: None, reviewer: User
) -> None:
    client = signed_in(reviewer)
    client.post(NEW, form(deployment=""))
    investigation = Investigation.objects.get()
    assert investigation.missing == ["deployment"]
    page = client.get(investigation.get_absolute_url()).content.decode()
    assert "Missing: Release" in page
    assert "<code>deployment</code>" not in page


def test_an_admin_is_told_which_roles_may_start_an_investigation(admin_user: User) -> None:
    body = signed_in(admin_user).get(NEW).content.decode()
    assert 'name="text"' not in body
    assert "knowledge search permission" in body
    assert "reviewer, operator roles" in body


def test_a_run_started_on_the_form_page_takes_the_focus_and_updates_the_lists(
    knowledge_base: None, reviewer: User
) -> None:
    """The answer to the form moves the focus to the run (so the page scrolls to it) and swaps
    the lists of runs in again, the new run among them, without a reload."""
    headers = {**HTMX, "HX-Current-URL": f"http://testserver{NEW}"}
    response = signed_in(reviewer).post(NEW, form(), headers=headers)
    assert response.status_code == 200
    body = response.content.decode()
    investigation = Investigation.objects.get()
    result, _, lists = body.partition('<div id="investigation-lists" hx-swap-oob="true">')
    assert 'id="investigation-heading" class="mono" data-focus-after-swap' in result
    assert investigation.run_id in lists and "Recent investigations" in lists


def test_a_poll_moves_no_focus_and_another_page_gets_no_lists(
    knowledge_base: None, reviewer: User
) -> None:
    client = signed_in(reviewer)
    client.post(NEW, form())
    queued = InvestigationRequest.objects.get()
    # Polled from the run's own page: no lists there to swap.
    own = {**HTMX, "HX-Current-URL": f"http://testserver{queued.get_absolute_url()}"}
    body = client.get(queued.get_absolute_url(), headers=own).content.decode()
    assert "investigation-lists" not in body and "data-focus-after-swap" not in body
    # Polled from the form page: the finished run swaps the lists in.
    on_form = {**HTMX, "HX-Current-URL": f"http://testserver{NEW}"}
    body = client.get(queued.get_absolute_url(), headers=on_form).content.decode()
    assert 'hx-swap-oob="true"' in body and "data-focus-after-swap" not in body


def test_a_step_says_ok_once(knowledge_base: None, reviewer: User) -> None:
    client = signed_in(reviewer)
    client.post(NEW, form())
    page = client.get(Investigation.objects.get().get_absolute_url()).content.decode()
    first = page.split('<ol class="steps">', 1)[1].split("</li>", 1)[0]
    assert len(re.findall(r">\s*ok\s*<", first)) == 1
