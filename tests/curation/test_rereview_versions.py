"""Re-review of what cites a document with a newer version (issue 39, item 13): both versions
linked and what changed shown beside the entry, word by word; an item that cannot be used now
is said to be unavailable and is not offered (nor allowed) a confirmation."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from curation.models import ReReview, ReReviewReason, ReReviewStatus
from curation.rereview import CONFIRM_UNAVAILABLE, rereview_confirm
from experience.cases.models import Case, Skill
from experience.review.revocation import case_revoke
from knowledge.models import Document
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Event
from tests.diffmarks import labels, marks
from tests.ui.conftest import knowledge, memory  # noqa: F401  (shared fixtures)
from tests.ui.factories import approved_case, approved_skill

pytestmark = pytest.mark.django_db


def _entry(item: Case | Skill, item_type: str) -> ReReview:
    return ReReview.objects.create(
        item_id=item.id,
        item_type=item_type,
        tenant=item.tenant,
        title=item.title,
        reason=ReReviewReason.DOCUMENT_NEW_VERSION,
        document_id="doc:rule-b@1",
        detail="doc:rule-b@2",
        detected_at=clock.now(),
    )


@pytest.fixture
def entries(
    knowledge: None,  # noqa: F811
    memory: dict[str, Any],  # noqa: F811
    operator: User,
    reviewer: User,
    second_reviewer: User,
) -> dict[str, Any]:
    """Two skills citing the document's first version: one made unavailable by the revocation
    of a case it cites, one still available."""
    first, second = memory["cases"]
    third = approved_case(submitter=operator, reviewer=reviewer, incident="INC-UI-3")
    available = approved_skill(
        submitter=operator, reviewer=second_reviewer, case_ids=[second.id, third.id]
    )
    case_revoke(case=first, actor=reviewer, reason="its store list was never checked")
    return {
        "revoked": first,
        "unavailable": _entry(memory["skill"], "skill"),
        "available": _entry(available, "skill"),
        "case_entry": _entry(second, "case"),
    }


def _row(html: str, entry: ReReview) -> str:
    return html.split(f'id="rereview-{entry.pk}"', 1)[1].split("</tr>", 1)[0]


def test_both_versions_are_linked_and_what_changed_is_shown_word_by_word(
    entries: dict[str, Any], second_reviewer: User
) -> None:
    client = Client()
    client.force_login(second_reviewer)
    html = client.get(reverse("curation:rereview-list")).content.decode()
    row = _row(html, entries["available"])
    old = Document.objects.get(doc_key="rule-b", version=1)
    new = Document.objects.get(doc_key="rule-b", version=2)
    assert f'<a class="mono" href="{old.get_absolute_url()}">doc:rule-b@1</a>' in row
    assert f'<a class="mono" href="{new.get_absolute_url()}">doc:rule-b@2</a>' in row
    assert "What changed from v1 to v2" in row
    found = marks(row)
    assert ("del", "3000") in found and ("ins", "3500") in found
    assert ("ins", "（修订）") in found  # the title, by character
    assert set(labels(row)) == {"[added in v2: ", "[removed in v2: "}
    assert "&quot;min&quot;" not in row


def test_an_unavailable_skill_is_said_so_and_offered_no_confirmation(
    entries: dict[str, Any], second_reviewer: User
) -> None:
    client = Client()
    client.force_login(second_reviewer)
    html = client.get(reverse("curation:rereview-list")).content.decode()
    unavailable = _row(html, entries["unavailable"])
    assert "unavailable now" in unavailable
    # The cited case named by its title, never its id.
    assert entries["revoked"].title in unavailable and entries["revoked"].id not in unavailable
    confirm = reverse("curation:rereview-confirm", args=[entries["unavailable"].pk])
    assert confirm not in unavailable and "Not offered for confirmation" in unavailable
    available = _row(html, entries["available"])
    assert "unavailable now" not in available
    assert reverse("curation:rereview-confirm", args=[entries["available"].pk]) in available


def test_confirming_an_unavailable_skill_is_refused_and_writes_nothing(
    entries: dict[str, Any], second_reviewer: User
) -> None:
    entry = entries["unavailable"]
    events = Event.objects.count()
    with pytest.raises(ValidationFailure) as refused:
        rereview_confirm(entry=entry, actor=second_reviewer, reason="it still holds")
    assert refused.value.message == CONFIRM_UNAVAILABLE and refused.value.field == "entry"
    entry.refresh_from_db()
    assert entry.status == ReReviewStatus.OPEN and Event.objects.count() == events
    # Posted anyway (a stale page): refused the same way.
    client = Client()
    client.force_login(second_reviewer)
    client.post(reverse("curation:rereview-confirm", args=[entry.pk]), {"reason": "holds"})
    entry.refresh_from_db()
    assert entry.status == ReReviewStatus.OPEN
    # The available one is confirmed.
    rereview_confirm(entry=entries["available"], actor=second_reviewer, reason="it holds")
    assert ReReview.objects.get(pk=entries["available"].pk).status == ReReviewStatus.CLOSED


def test_the_queue_reads_the_versions_in_constant_queries(
    entries: dict[str, Any], second_reviewer: User, django_assert_num_queries: Any
) -> None:
    client = Client()
    client.force_login(second_reviewer)
    url = reverse("curation:rereview-list")
    client.get(url)
    with CaptureQueriesContext(connection) as few:
        client.get(url)
    for _ in range(3):
        _entry(entries["revoked"], "case")  # more entries naming the same versions
    with django_assert_num_queries(len(few.captured_queries)):
        client.get(url)


def test_the_recertify_page_links_both_versions_and_shows_what_changed(
    entries: dict[str, Any], operator: User
) -> None:
    client = Client()
    client.force_login(operator)
    entry = entries["case_entry"]
    html = client.get(reverse("curation:rereview-recertify", args=[entry.pk])).content.decode()
    new = Document.objects.get(doc_key="rule-b", version=2)
    assert f'href="{new.get_absolute_url()}"' in html
    assert ("ins", "3500") in marks(html)


def test_the_queue_reads_in_chinese(entries: dict[str, Any], second_reviewer: User) -> None:
    client = Client()
    client.force_login(second_reviewer)
    html = client.get(
        reverse("curation:rereview-list"), headers={"Accept-Language": "zh-hans"}
    ).content.decode()
    row = _row(html, entries["unavailable"])
    assert "现在不可用" in row and "不提供确认" in row
    assert "v1 到 v2 的改动" in row
    assert set(labels(row)) == {"[v2 新增：", "[v2 删去："}
