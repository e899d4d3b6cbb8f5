"""Every item knows its console page, and an id string resolves to the same page."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from knowledge.models import Document
from knowledge.services import documents_import
from reviewconsole.links import item_url
from tests.knowledge.conftest import document
from tests.ui.factories import approved_case, approved_skill, record_run

pytestmark = pytest.mark.django_db


def test_items_and_their_ids_resolve_to_one_page(
    operator: User, reviewer: User, second_reviewer: User
) -> None:
    first = approved_case(submitter=operator, reviewer=reviewer, incident="INC-LINK-1")
    second = approved_case(submitter=operator, reviewer=reviewer, incident="INC-LINK-2")
    skill = approved_skill(
        submitter=operator, reviewer=second_reviewer, case_ids=[first.id, second.id]
    )
    run = record_run("run-link-1", skill, [first.id])
    documents_import(items=[document(doc_key="refund-rule")], actor=operator)
    doc = Document.objects.get(doc_key="refund-rule")

    assert first.digest == first.id.removeprefix("case:")
    assert skill.digest == skill.id.removeprefix("skill:")
    pages: dict[Any, str] = {
        first: reverse("experience:case-detail", args=[first.digest]),
        skill: reverse("experience:skill-detail", args=[skill.digest]),
        # A document's own page names its tenant (keys are per tenant).
        doc: reverse(
            "knowledge:tenant-document-detail", args=[doc.tenant, "refund-rule", doc.version]
        ),
    }
    for item, page in pages.items():
        assert item.get_absolute_url() == page
    assert item_url(first.id) == pages[first]
    assert item_url(skill.id) == pages[skill]
    # ``doc:KEY@N`` alone resolves among the tenants the reader sees.
    assert item_url(doc.public_id) == reverse(
        "knowledge:document-detail", args=["refund-rule", doc.version]
    )
    assert run.get_absolute_url() == reverse("experience:run-detail", args=["run-link-1"])


@pytest.mark.parametrize(
    "text", ["", "file:screenshot.png", "case:not-hex", "doc:refund-rule", "doc:x@0", "run-1"]
)
def test_text_naming_no_item_has_no_page(text: str) -> None:
    assert item_url(text) is None


def test_curation_and_evaluation_items_know_their_pages() -> None:
    from curation.models import SkillProposal, Thread
    from evaluation.models import ReplayReport

    assert Thread(thread_id="T-1", tenant="teahouse").get_absolute_url() == reverse(
        "curation:tenant-thread-detail", args=["teahouse", "T-1"]
    )
    assert SkillProposal(pk=3).get_absolute_url() == reverse("curation:proposal-detail", args=[3])
    assert ReplayReport(pk=4).get_absolute_url() == reverse("evaluation:report-detail", args=[4])
