"""Document lifecycle and the lexicon: atomic, permission-checked, audited, immutable content."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User

from knowledge.models import Document, Synonym
from knowledge.services import (
    LEXICON_REFUSED,
    NOTHING_CHANGED,
    document_approve,
    document_revoke,
    document_save_new_version,
    documents_import,
    synonym_delete,
    synonym_set,
)
from reviewconsole.errors import ImmutableContentError, PermissionRefused, ValidationFailure
from reviewconsole.models import Action, Event
from reviewconsole.permissions import NOT_PERMITTED
from reviewconsole.reasons import REASON_REQUIRED
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.helpers import tenants_exist
from tests.knowledge.conftest import document

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft(operator: User) -> Document:
    documents_import(items=[document(approved=False)], actor=operator)
    return Document.objects.get()


@pytest.fixture
def approver(make_user: Callable[[str, str], User]) -> User:
    """An operator other than the draft's author (who may not approve it)."""
    return make_user("oscar", Role.OPERATOR)


def test_approve_is_audited_with_reason(draft: Document, approver: User) -> None:
    document_approve(document=draft, actor=approver, reason="checked against the campaign sheet")

    draft.refresh_from_db()
    assert draft.approved and draft.approved_by == approver and draft.approved_at is not None
    event = Event.objects.get(action=Action.DOCUMENT_APPROVE)
    assert (event.actor, event.target, event.reason) == (
        approver,
        "doc:rule-x@1",
        "checked against the campaign sheet",
    )


@pytest.mark.parametrize("service", [document_approve, document_revoke])
def test_reason_is_required(draft: Document, approver: User, service: object) -> None:
    with pytest.raises(ValidationFailure) as failure:
        service(document=draft, actor=approver, reason="  ")  # type: ignore[operator]
    assert failure.value.field == "reason" and failure.value.message == REASON_REQUIRED
    assert not Event.objects.filter(action__in=[Action.DOCUMENT_APPROVE, Action.DOCUMENT_REVOKE])


def test_revoke_records_who_when_and_why(draft: Document, operator: User) -> None:
    document_revoke(document=draft, actor=operator, reason="wrong threshold")

    draft.refresh_from_db()
    assert (
        draft.revoked and draft.revoked_by == operator and draft.revoked_reason == "wrong threshold"
    )
    assert Event.objects.filter(action=Action.DOCUMENT_REVOKE, target="doc:rule-x@1").count() == 1
    with pytest.raises(ValidationFailure):
        document_revoke(document=draft, actor=operator, reason="again")


def test_revoked_document_cannot_be_approved(draft: Document, operator: User) -> None:
    document_revoke(document=draft, actor=operator, reason="wrong")
    with pytest.raises(ValidationFailure):
        document_approve(document=draft, actor=operator, reason="ok")


@pytest.mark.parametrize("role_fixture", ["agent", "reviewer", "admin_user"])
def test_only_operators_approve_documents(
    request: pytest.FixtureRequest, draft: Document, role_fixture: str
) -> None:
    with pytest.raises(PermissionRefused):
        document_approve(document=draft, actor=request.getfixturevalue(role_fixture), reason="ok")


def test_saved_content_cannot_be_edited_in_place(draft: Document) -> None:
    draft.text = "偷偷改掉的正文"
    with pytest.raises(ImmutableContentError):
        draft.save()
    with pytest.raises(ImmutableContentError):
        draft.save(update_fields=["text"])


def test_a_change_is_saved_as_the_next_version(draft: Document, operator: User) -> None:
    new = document_save_new_version(base=draft, changes={"text": "新版正文。"}, actor=operator)

    assert new.public_id == "doc:rule-x@2"
    assert not new.approved
    assert new.content_hash != draft.content_hash
    assert list(new.store_rows.values_list("store", flat=True)) == ["store-100"]
    draft.refresh_from_db()
    assert draft.text == document()["text"]
    assert Event.objects.filter(action=Action.DOCUMENT_CREATE, target="doc:rule-x@2").exists()


def test_an_unchanged_save_is_refused(draft: Document, operator: User) -> None:
    with pytest.raises(ValidationFailure) as failure:
        document_save_new_version(base=draft, changes={}, actor=operator)
    assert failure.value.message == NOTHING_CHANGED


def test_seeded_lexicon_holds_the_documented_examples() -> None:
    lexicon = dict(Synonym.objects.values_list("term", "canonical"))
    assert lexicon["代金券"] == "优惠券"
    assert lexicon["抵扣券"] == "优惠券"
    assert lexicon["用不了"] == "无法使用"


def test_lexicon_edits_reindex_and_are_audited(operator: User) -> None:
    documents_import(items=[document(text="点数规则。")], actor=operator)
    before = Document.objects.get().expanded_tokens.split()
    assert "点数" in before and "积分" not in before

    synonym_set(term="点数", canonical="积分", actor=operator)
    after = Document.objects.get().expanded_tokens.split()
    event = Event.objects.get(action=Action.LEXICON_CHANGE)
    assert "积分" in after and "点数" not in after
    assert (event.target, event.details["canonical"]) == ("synonym:点数", "积分")

    synonym_delete(synonym=Synonym.objects.get(term="点数"), actor=operator)
    assert Document.objects.get().expanded_tokens.split() == before
    assert Event.objects.filter(action=Action.LEXICON_CHANGE).count() == 2


def test_lexicon_edits_need_the_operator_role(reviewer: User) -> None:
    with pytest.raises(PermissionRefused):
        synonym_set(term="点数", canonical="积分", actor=reviewer)


@pytest.mark.parametrize("role", [Role.OPERATOR, Role.ADMIN])
def test_a_tenant_limited_user_may_not_change_the_shared_lexicon(role: Role) -> None:
    """One lexicon serves every tenant; the rule was the admin's alone, so a tenant-limited
    operator calling the service directly changed every tenant's search (issue 25, item 3)."""
    tenants_exist("teahouse")
    limited = user_set_role(username=f"limited-{role}", role=role, tenants=["teahouse"])
    seeded = Synonym.objects.get(term="代金券")
    lexicon = dict(Synonym.objects.values_list("term", "canonical"))

    with pytest.raises(PermissionRefused) as refused:
        synonym_set(term="点数", canonical="积分", actor=limited)
    assert (refused.value.message, refused.value.unmet) == (LEXICON_REFUSED, NOT_PERMITTED)
    with pytest.raises(PermissionRefused) as refused:
        synonym_delete(synonym=seeded, actor=limited)
    assert (refused.value.message, refused.value.unmet) == (LEXICON_REFUSED, NOT_PERMITTED)

    assert dict(Synonym.objects.values_list("term", "canonical")) == lexicon
    assert not Event.objects.filter(action=Action.LEXICON_CHANGE).exists()
