"""Knowledge pages: filters, version history with a diff, and the search preview."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from knowledge.models import Document
from knowledge.services import document_save_new_version
from tests.diffmarks import labels, marks, section

HTMX = {"HX-Request": "true"}
SEARCH = {
    "query": "优惠券无法使用",
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


def _search(client: Client, **changes: Any) -> Any:
    params = {**SEARCH, **changes}
    return client.get(reverse("knowledge:search-preview") + "?" + urlencode(params))


@pytest.mark.parametrize(
    ("query", "present", "absent"),
    [
        ("campaign=campaign-c", ["doc:rule-c-30@1", "doc:rule-c-40@1"], ["doc:rule-a@1"]),
        ("status=submitted", ["doc:case-a-draft@1"], ["doc:rule-a@2"]),
        ("status=revoked", ["doc:rule-b-preview@1"], ["doc:rule-b@1"]),
        ("store=store-009", ["doc:rule-a-store-009@1"], ["doc:rule-a@2"]),
        ("kind=case", ["doc:case-a@1"], ["doc:rule-a@2"]),
        ("q=rule-b", ["doc:rule-b@2", "doc:rule-b@1"], ["doc:rule-a@2"]),
    ],
)
def test_document_filters(
    query: str,
    present: list[str],
    absent: list[str],
    knowledge: None,
    operator: User,
    client: Client,
) -> None:
    client.force_login(operator)
    html = client.get(
        reverse("knowledge:document-list") + "?" + query, headers=HTMX
    ).content.decode()
    for public_id in present:
        assert public_id in html
    for public_id in absent:
        assert public_id not in html


def test_detail_diffs_against_the_previous_version(
    knowledge: None, operator: User, client: Client
) -> None:
    """Field by field as the page shows them, words marked, never raw JSON lines (issue 39,
    item 4)."""
    client.force_login(operator)
    html = client.get(reverse("knowledge:document-detail", args=["rule-b", 2])).content.decode()
    assert "Version history" in html and "&quot;min&quot;" not in html
    diff = section(html, 'id="document-diff"', "</section>")
    assert "v1 → v2: 5 fields changed." in diff
    # Chinese marked by character, the requirement's number and the source's path by word.
    assert marks(section(diff, '<dd class="field-title">')) == [("ins", "（修订）")]
    assert marks(section(diff, '<dd class="field-requirements">')) == [
        ("del", "3000"),
        ("ins", "3500"),
    ]
    assert "Basket (cents): at least " in section(diff, '<dd class="field-requirements">')
    assert marks(section(diff, '<dd class="field-source">')) == [("ins", "/v2")]
    text = marks(section(diff, '<dd class="field-text">'))
    assert any("35" in t for tag, t in text if tag == "ins")
    assert any("30" in t for tag, t in text if tag == "del")
    # Each mark is named for a screen reader, not by its colour alone.
    assert set(labels(diff)) == {"[added in v2: ", "[removed in v2: "}
    assert "Unchanged:" in diff and "Campaign" in diff
    fragment = client.get(
        reverse("knowledge:document-detail", args=["rule-b", 1]) + "?against=2", headers=HTMX
    ).content.decode()
    assert fragment.lstrip().startswith('<section class="panel" id="document-diff"')
    assert ("ins", "3500") in marks(fragment)


def test_a_version_saved_as_new_shows_up_as_a_draft_with_its_diff(
    knowledge: None, operator: User, client: Client
) -> None:
    base = Document.objects.get(doc_key="rule-a", version=2)
    document_save_new_version(base=base, changes={"text": "Revised wording."}, actor=operator)
    client.force_login(operator)
    html = client.get(reverse("knowledge:document-detail", args=["rule-a", 3])).content.decode()
    assert "badge-draft" in html
    text = section(html, '<dd class="field-text">')
    assert ("ins", "Revised wording.") in marks(text)
    assert [tag for tag, _text in marks(text)] == ["del", "ins"]


def test_unknown_document_is_404(knowledge: None, operator: User, client: Client) -> None:
    client.force_login(operator)
    assert client.get(reverse("knowledge:document-detail", args=["nope", 1])).status_code == 404


def test_search_preview_renders_the_search_result(
    knowledge: None, operator: User, client: Client
) -> None:
    client.force_login(operator)
    html = _search(client).content.decode()
    assert "badge-retrieved" in html
    assert "doc:rule-a@2" in html and "doc:case-a@1" in html
    assert "历史案例，仅作排查线索" in html
    assert "badge-mismatch" in html and "<code>product</code>" in html
    assert reverse("knowledge:document-detail", args=["rule-a", 2]) in html


def test_search_preview_without_campaign_needs_context(
    knowledge: None, operator: User, client: Client
) -> None:
    client.force_login(operator)
    html = _search(client, campaign="").content.decode()
    # The missing field named as the form labels it, not by its code.
    assert "badge-needs_context" in html and "Missing: Campaign</p>" in html
    assert "<code>campaign</code>" not in html


def test_search_preview_conflicting_sources(
    knowledge: None, operator: User, client: Client
) -> None:
    client.force_login(operator)
    html = _search(
        client, store="store-003", campaign="campaign-c", query="优惠券门槛"
    ).content.decode()
    assert "badge-conflicting_sources" in html and "badge-conflict" in html


def test_search_preview_reads_times_in_the_chosen_zone(
    knowledge: None, operator: User, client: Client
) -> None:
    client.force_login(operator)
    # 14:00 in Shanghai is 06:00 UTC; rule-b v2 was published at 15:00 Shanghai time.
    shanghai = _search(
        client, store="store-002", campaign="campaign-b", known_at="2026-09-18T14:10"
    ).content.decode()
    utc = _search(
        client,
        store="store-002",
        campaign="campaign-b",
        timezone="UTC",
        occurred_at="2026-09-18T06:00",
        known_at="2026-09-18T07:10",
    ).content.decode()
    assert "doc:rule-b@1" in shanghai and "doc:rule-b@2" not in shanghai
    assert "doc:rule-b@2" in utc


def test_search_preview_form_errors(knowledge: None, operator: User, client: Client) -> None:
    client.force_login(operator)
    response = _search(client, timezone="Mars/Olympus", extra_facts="not a fact")
    assert response.status_code == 422
    html = response.content.decode()
    assert "is not a known time zone" in html and "write name=value" in html
    fragment = _search(client, query="", **{}).content.decode()
    assert "The search was not run" in fragment


def test_search_preview_opens_with_defaults(operator: User, client: Client) -> None:
    client.force_login(operator)
    html = client.get(reverse("knowledge:search-preview")).content.decode()
    assert (
        'value="teahouse"' in html
        and 'value="leaf-and-cup"' in html
        and 'value="Asia/Shanghai"' in html
    )
    assert "badge-" not in html.split('id="search-results"', 1)[1]
