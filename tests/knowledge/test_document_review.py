"""Approving and revoking knowledge documents: one set of rules for the admin, the CLI and imports.

The approver of a version is not its author (unless a one-person deployment turns four eyes off);
an import may attest an approval given before it; every revocation stores what it reached; a new
version is published when its author says, by default when it is saved, never when its
predecessor was.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from experience.review.documents import document_revoke
from experience.runs.models import RevocationImpact
from experience.runs.records import run_store
from knowledge import services as knowledge_services
from knowledge.models import Document
from knowledge.services import (
    ATTESTED_IMPORT,
    NOTHING_CHANGED,
    OWN_SUBMISSION,
    DocumentReviewRefused,
    document_approve,
    document_save_new_version,
    document_submit,
    documents_import,
)
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action, Event
from reviewconsole.roles import Role
from reviewconsole.services import system_agent
from tests.knowledge.conftest import document

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 9, 20, 2, 0, tzinfo=UTC)
BASE_PUBLISHED = datetime(2026, 8, 31, 1, 0, tzinfo=UTC)  # document()'s published_at


@pytest.fixture
def now(frozen_clock: Callable[[datetime], Any]) -> datetime:
    frozen_clock(NOW)
    return NOW


@pytest.fixture
def second_operator(make_user: Callable[[str, str], User]) -> User:
    return make_user("oscar", Role.OPERATOR)


@pytest.fixture
def draft(operator: User) -> Document:
    """A draft saved (imported) by ``operator``: its author."""
    documents_import(items=[document(approved=False)], actor=operator)
    return Document.objects.get()


@pytest.fixture
def approved(operator: User) -> Document:
    documents_import(items=[document()], actor=operator)
    return Document.objects.get()


def cite(document_id: str, run_id: str) -> None:
    """A run whose tool result cited ``document_id``."""
    run_store(
        run_id=run_id,
        skill_id="skill:x",
        scope={},
        context={},
        steps=[],
        observations=[],
        cases=[],
        status="needs_review",
        reason="",
        tool_calls=1,
        started_at=NOW,
        finished_at=NOW,
        cited_documents=[document_id],
        actor=system_agent(),
    )


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def review(*args: str) -> tuple[dict[str, Any], bool]:
    out = StringIO()
    try:
        call_command("review", *args, "--json", stdout=out)
    except CommandError:
        return json.loads(out.getvalue()), False
    return json.loads(out.getvalue()), True


def admin_action(user: User, action: str, document: Document, reason: str) -> Client:
    client = client_for(user)
    client.post(
        "/admin/knowledge/document/",
        {
            "action": action,
            "_selected_action": [str(document.pk)],
            "confirm": "yes",
            "reason": reason,
        },
    )
    return client


# --- four eyes -------------------------------------------------------------------------------


def test_the_author_of_a_version_cannot_approve_it(draft: Document, operator: User) -> None:
    with pytest.raises(DocumentReviewRefused) as refused:
        document_approve(document=draft, actor=operator, reason="looks right to me")

    assert refused.value.conditions == [OWN_SUBMISSION]
    assert refused.value.field == "document"
    draft.refresh_from_db()
    assert not draft.approved
    assert not Event.objects.filter(action=Action.DOCUMENT_APPROVE).exists()


def test_another_operator_approves_it(
    draft: Document, operator: User, second_operator: User
) -> None:
    document_approve(document=draft, actor=second_operator, reason="checked the sheet")

    draft.refresh_from_db()
    assert draft.approved and draft.approved_by == second_operator
    assert draft.created_by == operator


def test_the_cli_names_own_submission(
    draft: Document, operator: User, second_operator: User
) -> None:
    refused, ok = review("approve", draft.public_id, "--as", operator.username, "--reason", "ok")
    assert not ok and refused["unmet"] == [OWN_SUBMISSION]

    approved, ok = review(
        "approve", draft.public_id, "--as", second_operator.username, "--reason", "ok"
    )
    assert ok and approved["status"] == "approved"


def test_the_admin_action_refuses_the_author(
    draft: Document, operator: User, second_operator: User
) -> None:
    admin_action(operator, "approve_selected", draft, "mine, but fine")
    draft.refresh_from_db()
    assert not draft.approved

    admin_action(second_operator, "approve_selected", draft, "checked the sheet")
    draft.refresh_from_db()
    assert draft.approved and draft.approved_by == second_operator


def test_a_one_person_deployment_may_turn_four_eyes_off(
    draft: Document, operator: User, settings: Any
) -> None:
    settings.KNOWLEDGE_FOUR_EYES = False
    document_approve(document=draft, actor=operator, reason="the only operator here")

    draft.refresh_from_db()
    assert draft.approved and draft.approved_by == operator


def test_four_eyes_is_on_by_default() -> None:
    from django.conf import settings

    assert settings.KNOWLEDGE_FOUR_EYES is True


def test_the_author_may_revoke_their_own_version(approved: Document, operator: User) -> None:
    document_revoke(document=approved, actor=operator, reason="I got the threshold wrong")
    approved.refresh_from_db()
    assert approved.revoked


def test_an_import_attests_an_approval_given_before_it(operator: User) -> None:
    documents_import(items=[document(approved=True)], actor=operator)

    stored = Document.objects.get()
    assert stored.approved and stored.approved_by == operator and stored.created_by == operator
    event = Event.objects.get(action=Action.DOCUMENT_APPROVE, target=stored.public_id)
    assert event.actor == operator
    # Like every approval, it names who created the approving account (none: the shell).
    assert event.details == {
        "attested_import": True,
        "importer": operator.username,
        "account_created_by": None,
    }
    assert ATTESTED_IMPORT in event.reason


def test_reason_and_own_submission_are_named_together(draft: Document, operator: User) -> None:
    with pytest.raises(DocumentReviewRefused) as refused:
        document_approve(document=draft, actor=operator, reason=" ")
    assert refused.value.conditions == ["reason_required", OWN_SUBMISSION]
    assert refused.value.field == "reason"


# --- one revocation, one stored impact -----------------------------------------------------------


def test_the_service_stores_the_impact_of_a_revocation(approved: Document, operator: User) -> None:
    cite(approved.public_id, "run-1")
    cite("doc:other@1", "run-2")

    review_ = document_revoke(document=approved, actor=operator, reason="wrong threshold")

    assert review_.impact == {"skills": [], "runs": ["run-1"]}
    stored = RevocationImpact.objects.get(item_id=approved.public_id)
    assert (stored.item_type, stored.runs, stored.revoked_by, stored.reason) == (
        "document",
        ["run-1"],
        operator,
        "wrong threshold",
    )
    event = Event.objects.get(action=Action.DOCUMENT_REVOKE, target=approved.public_id)
    assert event.details["impact"] == {"skills": [], "runs": ["run-1"]}


def test_knowledges_own_callers_reach_the_one_revocation(
    approved: Document, operator: User
) -> None:
    """``knowledge.services.document_revoke`` (and knowledge's pages, admin and import) revoke
    through experience's revocation, installed at start-up: the impact is stored with it."""
    cite(approved.public_id, "run-1")

    review_ = knowledge_services.document_revoke(
        document=approved, actor=operator, reason="wrong threshold"
    )

    assert review_.document.revoked and review_.impact == {"skills": [], "runs": ["run-1"]}
    assert RevocationImpact.objects.get(item_id=approved.public_id).runs == ["run-1"]


def test_revoking_in_the_admin_stores_the_impact(approved: Document, operator: User) -> None:
    cite(approved.public_id, "run-1")

    admin_action(operator, "revoke_selected", approved, "wrong threshold")

    approved.refresh_from_db()
    assert approved.revoked
    assert RevocationImpact.objects.get(item_id=approved.public_id).runs == ["run-1"]


def test_the_cli_and_the_admin_store_one_impact_each(
    make_user: Callable[[str, str], User], operator: User
) -> None:
    documents_import(
        items=[document(), document(doc_key="rule-y", title="另一条规则")], actor=operator
    )
    cite("doc:rule-x@1", "run-1")
    cite("doc:rule-y@1", "run-1")

    revoked, ok = review("revoke", "doc:rule-x@1", "--as", operator.username, "--reason", "错")
    assert ok and revoked["impact"] == {"skills": [], "runs": ["run-1"]}
    admin_action(operator, "revoke_selected", Document.objects.get(doc_key="rule-y"), "错")

    assert sorted(RevocationImpact.objects.values_list("item_id", flat=True)) == [
        "doc:rule-x@1",
        "doc:rule-y@1",
    ]


def test_a_refused_revocation_stores_nothing(approved: Document, reviewer: User) -> None:
    cite(approved.public_id, "run-1")
    refused, ok = review("revoke", approved.public_id, "--as", reviewer.username, "--reason", "x")
    assert not ok and refused["unmet"] == ["not_permitted"]
    assert not RevocationImpact.objects.exists()


def test_the_cli_preview_names_what_a_revocation_lacks(approved: Document, reviewer: User) -> None:
    preview, ok = review("revoke", approved.public_id, "--as", reviewer.username, "--preview")
    assert ok and preview["unmet"] == ["not_permitted", "reason_required"]


# --- a new version's publication time ----------------------------------------------------------


def test_a_new_version_is_published_when_it_is_saved(
    approved: Document, operator: User, now: datetime
) -> None:
    assert approved.published_at == BASE_PUBLISHED
    new = document_save_new_version(base=approved, changes={"text": "新版正文。"}, actor=operator)
    assert new.published_at == now


def test_a_new_version_is_published_when_its_author_says(
    approved: Document, operator: User, now: datetime
) -> None:
    later = datetime(2026, 9, 25, tzinfo=UTC)
    new = document_save_new_version(
        base=approved, changes={"text": "新版正文。", "published_at": later}, actor=operator
    )
    assert new.published_at == later


def test_a_default_publication_time_alone_is_no_change(approved: Document, operator: User) -> None:
    with pytest.raises(ValidationFailure) as failure:
        document_save_new_version(base=approved, changes={}, actor=operator)
    assert failure.value.message == NOTHING_CHANGED


def _change_form(document_: Document, **overrides: str) -> dict[str, str]:
    data = {
        "doc_key": document_.doc_key,
        "version": str(document_.version),
        "tenant": document_.tenant,
        "brand": document_.brand,
        "campaign": document_.campaign,
        "kind": document_.kind,
        "rule_key": document_.rule_key,
        "title": document_.title,
        "text": document_.text,
        "source": document_.source,
        # The form shows times in TIME_ZONE, which the admin tests set to UTC.
        "valid_from_0": document_.valid_from.astimezone(UTC).strftime("%Y-%m-%d"),
        "valid_from_1": document_.valid_from.astimezone(UTC).strftime("%H:%M:%S"),
        "valid_to_0": "",
        "valid_to_1": "",
        "published_at_0": "",
        "published_at_1": "",
        "requirements": "{}",
        "stores": "store-100",
        "store_rows-TOTAL_FORMS": "0",
        "store_rows-INITIAL_FORMS": "0",
        "store_rows-MIN_NUM_FORMS": "0",
        "store_rows-MAX_NUM_FORMS": "1000",
    }
    data.update(overrides)
    return data


def test_the_admin_change_page_does_not_offer_the_old_publication_time(
    approved: Document, operator: User
) -> None:
    page = client_for(operator).get(f"/admin/knowledge/document/{approved.pk}/change/")
    form = page.context["adminform"].form
    assert form.initial["published_at"] is None
    assert not form.fields["published_at"].required


def test_saving_a_change_in_the_admin_publishes_the_new_version_now(
    approved: Document, operator: User, now: datetime, settings: Any
) -> None:
    settings.TIME_ZONE = "UTC"
    client = client_for(operator)
    response = client.post(
        f"/admin/knowledge/document/{approved.pk}/change/",
        _change_form(approved, text="新版正文。", _continue="1"),
        follow=True,
    )

    new = Document.objects.get(doc_key="rule-x", version=2)
    assert new.published_at == now
    assert response.redirect_chain[-1][0] == f"/admin/knowledge/document/{new.pk}/change/"
    shown = [str(message) for message in response.context["messages"]]
    assert any("Saved doc:rule-x@2 as a draft, a new version of rule-x" in m for m in shown)
    assert not any("changed successfully" in m for m in shown)


def test_the_author_of_a_change_may_give_its_publication_time(
    approved: Document, operator: User, now: datetime, settings: Any
) -> None:
    settings.TIME_ZONE = "UTC"
    client_for(operator).post(
        f"/admin/knowledge/document/{approved.pk}/change/",
        _change_form(
            approved, text="新版正文。", published_at_0="2026-09-25", published_at_1="08:00:00"
        ),
    )
    new = Document.objects.get(doc_key="rule-x", version=2)
    assert new.published_at == datetime(2026, 9, 25, 8, 0, tzinfo=UTC)


def test_an_unchanged_admin_save_is_refused(
    approved: Document, operator: User, now: datetime, settings: Any
) -> None:
    settings.TIME_ZONE = "UTC"
    response = client_for(operator).post(
        f"/admin/knowledge/document/{approved.pk}/change/", _change_form(approved)
    )
    assert response.status_code == 200
    assert NOTHING_CHANGED in response.content.decode()
    assert Document.objects.count() == 1


def test_a_version_saved_just_now_is_found_by_the_search_preview_defaults(
    operator: User, second_operator: User, frozen_clock: Callable[[datetime], Any], settings: Any
) -> None:
    """The preview's default "known at" is now to the second, not cut back to the minute."""
    settings.TIME_ZONE = "UTC"
    saved_at = datetime(2026, 9, 20, 2, 0, 37, tzinfo=UTC)
    frozen_clock(saved_at)
    documents_import(items=[document()], actor=operator)
    new = document_save_new_version(
        base=Document.objects.get(), changes={"text": "活动X的优惠券外卖也可用。"}, actor=operator
    )
    document_submit(document=new, actor=operator, change_note="delivery orders count too")
    document_approve(document=new, actor=second_operator, reason="checked")

    client = client_for(operator)
    initial = client.get("/knowledge/search/").context["form"].initial
    assert datetime.fromisoformat(initial["known_at"]).replace(tzinfo=UTC) >= saved_at
    found = client.get(
        "/knowledge/search/",
        {
            **initial,
            "query": "活动X优惠券",
            "store": "store-100",
            "campaign": "campaign-x",
            "occurred_at": "2026-09-10T00:00:00",
        },
    ).content.decode()
    assert new.public_id in found
