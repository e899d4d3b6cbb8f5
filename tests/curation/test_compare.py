"""Compare and decide (issue 28, item 4): a candidate beside the approved case it resembles,
section by section, differences marked, the decision beside them; full page and fragment, one
tenant's pair a 404 for another tenant's users."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from curation.domain.similarity import COMPARED_SECTIONS, ONLY_HERE, SAME, SIMILAR, compare_cases
from curation.models import NearDuplicate
from curation.views.similarity import similarity_phrase
from experience.cases.models import Case
from reviewconsole import clock
from reviewconsole.models import TenantMembership
from reviewconsole.services import user_set_role
from tests.curation.conftest import other_wording
from tests.diffmarks import labels, marks, new_text, old_text
from tests.experience.conftest import case_data

pytestmark = pytest.mark.django_db


def test_statements_are_marked_same_similar_or_only_in_one_case() -> None:
    left = case_data()
    right = case_data(
        observations=[{"source_id": "thread:2#m1", "excerpt": "店员：打印机没反应。"}]
    )
    right["diagnosis"]["statement"] = "活动适用门店不含二号店！"  # folds to the same text
    right["outcome"]["statement"] = "补充门店后，订单恢复。"
    rows = {row.section: row for row in compare_cases(left, right)}
    assert list(rows) == ["observations", "diagnosis", "counterevidence", "outcome"]
    assert [e.match for e in rows["observations"].left] == [ONLY_HERE]
    assert [e.match for e in rows["diagnosis"].left] == [SAME]
    assert not rows["diagnosis"].differs and not rows["counterevidence"].differs
    assert rows["outcome"].differs and rows["outcome"].left[0].match == SIMILAR
    assert rows["counterevidence"].left[0].text == "缓存未刷新: 刷新后仍失败。"


@pytest.fixture
def pair(
    approve: Callable[..., Case], submit: Callable[..., Case], reviewer: User
) -> dict[str, Any]:
    approved = approve(case_data(incident="INC-A"))
    candidate = submit(other_wording("INC-B"))
    first, second = sorted((approved, candidate), key=lambda c: c.id)
    link, _ = NearDuplicate.objects.get_or_create(
        case_a=first, case_b=second, defaults={"similarity": 0.62, "detected_at": clock.now()}
    )
    return {"approved": approved, "candidate": candidate, "link": link}


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_candidate_stands_beside_the_approved_case_with_the_decision_beside_them(
    pair: dict[str, Any], second_reviewer: User, django_assert_max_num_queries: Any
) -> None:
    link, candidate, approved = pair["link"], pair["candidate"], pair["approved"]
    url = reverse("curation:link-compare", args=[link.pk])
    client = client_for(second_reviewer)
    with django_assert_max_num_queries(15):
        page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    # The candidate on the left, the approved case it resembles on the right.
    assert html.index(candidate.title) < html.index(approved.title)
    assert "Candidate" in html and "Approved case it resembles" in html
    # One row per section, in order, each with both cases' statements.
    starts = [html.index(f'id="row-{s}"') for s in COMPARED_SECTIONS]
    assert starts == sorted(starts)
    diagnosis = html[starts[1] : starts[2]]
    assert "活动门店范围没有二号店。" in new_text(diagnosis)
    assert "活动适用门店不含二号店。" in old_text(diagnosis)
    assert "badge-differs" in diagnosis
    counter = html[starts[2] : starts[3]]
    assert "badge-same" in counter and "only in this case" not in counter
    # The decision: one incident or two (CSRF, back to this page), and the candidate's review.
    panel = html.split('id="decision-panel"', 1)[1]
    assert f'action="{reverse("curation:link-resolve", args=[link.pk])}"' in panel
    assert "csrfmiddlewaretoken" in panel and f'name="next" value="{url}"' in panel
    assert f'href="{candidate.get_absolute_url()}"' in panel and "Review the candidate" in panel
    fragment = client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<div id="compare-main">') and "<html" not in fragment


def test_the_near_duplicates_list_leads_to_the_comparison(
    pair: dict[str, Any], second_reviewer: User
) -> None:
    html = client_for(second_reviewer).get(reverse("curation:link-list")).content.decode()
    assert f'href="{reverse("curation:link-compare", args=[pair["link"].pk])}"' in html


def test_deciding_from_the_comparison_returns_to_it(
    pair: dict[str, Any], second_reviewer: User
) -> None:
    link = pair["link"]
    url = reverse("curation:link-compare", args=[link.pk])
    done = client_for(second_reviewer).post(
        reverse("curation:link-resolve", args=[link.pk]),
        {"decision": "different", "reason": "another store", "next": url},
    )
    assert done.status_code in (302, 303) and done["Location"] == url
    assert NearDuplicate.objects.get(pk=link.pk).status == "different"


def test_another_tenants_pair_is_not_found_and_anonymous_users_log_in(
    pair: dict[str, Any],
) -> None:
    outsider = user_set_role(username="otto", role="reviewer", password="x-Pass-12345")
    TenantMembership.objects.create(user=outsider, tenant="riverside")
    url = reverse("curation:link-compare", args=[pair["link"].pk])
    assert client_for(outsider).get(url).status_code == 404
    assert (
        client_for(outsider).get(reverse("curation:link-compare", args=[987654])).status_code == 404
    )
    anonymous = Client().get(url)
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def _cells(html: str, section: str) -> tuple[str, str]:
    """The left and right cells of one row of the comparison."""
    row = html.split(f'id="row-{section}"', 1)[1].split('class="compare-label', 1)[0]
    left, right = row.split('<section class="compare-cell compare-right"', 1)
    return left, right


def test_each_field_is_compared_word_by_word_with_the_marks_named(
    pair: dict[str, Any], second_reviewer: User
) -> None:
    """Issue 39, item 4: title, summary, scope and every statement and excerpt, rendered, the
    words only one case has marked <ins> on the candidate's side and <del> on the approved
    case's, each mark named for a screen reader."""
    url = reverse("curation:link-compare", args=[pair["link"].pk])
    html = client_for(second_reviewer).get(url).content.decode()
    starts = [html.index(f'id="row-{s}"') for s in ("title", "summary", "scope")]
    assert starts == sorted(starts) and starts[-1] < html.index('id="row-observations"')
    # Chinese by character: the candidate's title adds 小程序, the approved one has 范围漏配.
    left, right = _cells(html, "title")
    assert ("ins", "小程序") in marks(left) and all(tag == "ins" for tag, _t in marks(left))
    assert ("del", "范围漏配") in marks(right) and all(tag == "del" for tag, _t in marks(right))
    assert new_text(left).strip().endswith(pair["candidate"].title)
    assert pair["approved"].title in old_text(right)
    # One scope: nothing marked.
    left, right = _cells(html, "scope")
    assert not marks(left) and not marks(right) and "store: store-002" in left
    # The diagnoses differ in a few characters; the shared evidence excerpt is unmarked.
    left, right = _cells(html, "diagnosis")
    assert marks(left) and marks(right)
    assert "活动门店范围没有二号店。" in new_text(left)
    assert "活动适用门店不含二号店。" in old_text(right)
    assert '<blockquote><span class="word-diff">运营：门店列表缺少二号店。</span>' in left
    assert set(labels(html)) == {
        "[only in: Candidate: ",
        "[only in: Approved case it resembles: ",
    }


def test_the_similarity_is_named_by_its_measure_the_same_way_in_every_list_and_page(
    pair: dict[str, Any], second_reviewer: User
) -> None:
    """Issue 39, item 8: one name per measure, in the list, the case's panel and the page."""
    link = pair["link"]
    percent = round(link.similarity * 100)
    client = client_for(second_reviewer)
    pages = [
        reverse("curation:link-list"),
        reverse("curation:case-similar", args=[pair["candidate"].id.split(":", 1)[1]]),
        reverse("curation:link-compare", args=[link.pk]),
    ]
    for url in pages:
        html = client.get(url).content.decode()
        assert similarity_phrase(link) in html, url
        assert f"{percent}% similar in wording" in html, url
        assert "in text" not in html and "in meaning" not in html, url
    NearDuplicate.objects.filter(pk=link.pk).update(found_by="meaning", similarity=0.97)
    for url in pages:
        html = client.get(url).content.decode()
        assert "97% similar in meaning" in html and "in wording" not in html, url


def test_a_candidate_beside_another_candidate_is_not_called_approved(
    submit: Callable[..., Case], second_reviewer: User
) -> None:
    first = submit(case_data(incident="INC-C1"))
    second = submit(other_wording("INC-C2"))
    a, b = sorted((first, second), key=lambda c: c.id)
    # Submitting the second links the two (near-duplicate detection).
    link, _ = NearDuplicate.objects.get_or_create(
        case_a=a, case_b=b, defaults={"similarity": 0.5, "detected_at": clock.now()}
    )
    html = (
        client_for(second_reviewer)
        .get(reverse("curation:link-compare", args=[link.pk]))
        .content.decode()
    )
    assert "Approved case it resembles" not in html
    assert "Another candidate it resembles" in html


def test_the_comparison_reads_in_chinese(pair: dict[str, Any], second_reviewer: User) -> None:
    client = client_for(second_reviewer)
    url = reverse("curation:link-compare", args=[pair["link"].pk])
    html = client.get(url, headers={"Accept-Language": "zh-hans"}).content.decode()
    percent = round(pair["link"].similarity * 100)
    assert f"措辞相似度 {percent}%" in html and "与之相似的已批准案例" in html
    assert "[仅见于：候选案例：" in labels(html)
