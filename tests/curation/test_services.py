"""Intake and curation services: each rule of the issue, each write audited."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User

from curation import incidents, proposals, rereview, scan, threads
from curation.domain.threads import CandidateDraft, CounterDraft, Pick
from curation.models import (
    IncidentMerge,
    LinkStatus,
    NearDuplicate,
    ProposalStatus,
    ReReview,
    ReReviewReason,
    ReReviewResolution,
    ReReviewStatus,
    SkillProposal,
    Thread,
)
from curation.selectors.incidents import incident_support
from curation.selectors.similarity import similar_cases
from experience.cases import selectors as experience_selectors
from experience.cases import services as experience_services
from experience.cases.models import Case, Skill
from experience.cases.schema import parse_skill
from experience.cases.tools import tool_specs
from experience.core import review
from experience.core.domain import OWN_SUBMISSION, TOO_FEW_INCIDENTS
from experience.core.models import Status
from experience.pages.selectors import QueueFilters, review_queue_rows
from experience.review import revocation as experience_revocation
from experience.runs import records as experience_run_records
from experience.runs.models import Reference
from knowledge.models import Document
from knowledge.services import document_revoke, documents_import
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action, Event
from reviewconsole.services import system_agent
from tests.curation.conftest import THREAD_ID, other_wording, thread_json, unrelated
from tests.experience.conftest import NOW, SCOPE, case_data, skill_data

Submit = Callable[..., Case]


def events(action: Action) -> list[Event]:
    return list(Event.objects.filter(action=action))


# --- thread intake -------------------------------------------------------------------------------


def test_importing_a_thread_stores_its_messages_and_is_audited(
    thread: Thread, operator: User
) -> None:
    assert thread.thread_id == THREAD_ID
    assert thread.messages.count() == 11
    m8 = thread.messages.get(message_id="m8")
    assert m8.role == "operations" and m8.attachments[0]["name"] == "活动B门店配置.png"
    (event,) = events(Action.THREAD_IMPORT)
    assert event.actor == operator and event.target == f"thread:{THREAD_ID}"


def test_reimporting_identical_content_changes_nothing(thread: Thread, operator: User) -> None:
    again, created = threads.thread_import(data=thread_json(), actor=operator)
    assert (again.pk, created) == (thread.pk, False)
    assert len(events(Action.THREAD_IMPORT)) == 1


def test_other_content_under_an_imported_id_is_refused(thread: Thread, operator: User) -> None:
    changed = thread_json()
    changed["messages"][9]["text"] = "顾客说还是不行。"
    with pytest.raises(ValidationFailure) as refused:
        threads.thread_import(data=changed, actor=operator)
    assert refused.value.field == "id"
    assert Thread.objects.get().messages.get(message_id="m10").text.endswith("好了，谢谢。")


def test_a_bad_thread_writes_nothing(operator: User, at_now: datetime) -> None:
    data = thread_json()
    data["messages"][5]["time"] = "yesterday"
    with pytest.raises(ValidationFailure, match=r"messages\[5\]\.time"):
        threads.thread_import(data=data, actor=operator)
    assert not Thread.objects.exists() and not events(Action.THREAD_IMPORT)


def test_agents_and_admins_cannot_import_threads(
    agent: User, admin_user: User, at_now: datetime
) -> None:
    for user in (agent, admin_user):
        with pytest.raises(PermissionRefused):
            threads.thread_import(data=thread_json(), actor=user)


def store_scope_draft(**changes: Any) -> CandidateDraft:
    values: dict[str, Any] = {
        "scope": dict(SCOPE),
        "incident": "INC-0918",
        "title": "二号店优惠券无法使用：活动 B 门店范围漏配",
        "summary": "",
        "valid_from": "2026-09-18T00:00:00+08:00",
        "valid_to": "2027-09-18T00:00:00+08:00",
        "diagnosis": "活动 B 的适用门店列表不含二号店。",
        "counterevidence": (
            CounterDraft(
                "客户端缓存未刷新", "刷新和重新登录后仍失败。", "仅客户端缓存；服务端缓存未排除"
            ),
        ),
        "outcome": "补充门店后顾客可以下单。",
    }
    values.update(changes)
    return CandidateDraft(**values)


PICKS = [
    Pick("m1", "observation"),
    Pick("m8", "diagnosis", "适用门店列表只有一号店和三号店，二号店漏配了"),
    Pick("m8/attachment-1", "diagnosis"),
    Pick("m4", "counter-1"),
    Pick("m5", "counter-1", "刷新后仍失败，说明至少不是客户端缓存的问题"),
    Pick("m10", "outcome", "好了，谢谢"),
]


def test_a_candidate_built_from_picked_messages_lands_in_the_review_queue(
    thread: Thread, operator: User
) -> None:
    case, created = threads.candidate_build(
        thread=thread, picks=PICKS, draft=store_scope_draft(), actor=operator
    )
    assert created and case.status == Status.CANDIDATE and case.submitted_via == "console"
    assert case.submitted_by == operator
    queued = review_queue_rows(QueueFilters(), now=NOW)
    assert case.id in [row["id"] for row in queued]
    sources = dict(case.evidence_items.values_list("key", "source_id"))
    prefix = f"thread:{THREAD_ID}#"
    assert sources == {
        "observations/0": prefix + "m1",
        "diagnosis/0": prefix + "m8",
        "diagnosis/1": prefix + "m8/attachment-1",
        "counterevidence/0/0": prefix + "m4",
        "counterevidence/0/1": prefix + "m5",
        "outcome/0": prefix + "m10",
    }
    # The agent's messages (m2, m11: "the cause was the cache") were not picked, so are not in it.
    assert not case.evidence_items.filter(source_id__in=[prefix + "m2", prefix + "m11"]).exists()
    # A person checks the evidence later: nothing is checked at submission.
    assert not case.evidence_items.filter(checks__isnull=False).exists()
    (build,) = events(Action.THREAD_BUILD)
    assert build.target == case.id and build.actor == operator
    assert build.details["thread"] == THREAD_ID
    assert Event.objects.filter(action=Action.CASE_SUBMIT, target=case.id).exists()


def test_the_built_candidate_is_approved_by_another_reviewer_once_checked(
    thread: Thread, operator: User, reviewer: User
) -> None:
    case, _ = threads.candidate_build(
        thread=thread, picks=PICKS, draft=store_scope_draft(), actor=operator
    )
    experience_services.evidence_check(case=case, key="diagnosis/0", actor=reviewer)
    outcome = experience_services.case_approve(case=case, actor=reviewer, reason="配置截图核对无误")
    assert outcome.status == Status.APPROVED


def test_a_refused_build_submits_nothing(thread: Thread, operator: User) -> None:
    with pytest.raises(ValidationFailure) as refused:
        threads.candidate_build(
            thread=thread,
            picks=[Pick("m10", "outcome", "缓存刷新后好了")],
            draft=store_scope_draft(),
            actor=operator,
        )
    assert refused.value.field == "excerpt[m10]"
    placeholder = store_scope_draft(scope={**SCOPE, "store": "any"})
    with pytest.raises(ValidationFailure) as refused:
        threads.candidate_build(thread=thread, picks=PICKS, draft=placeholder, actor=operator)
    assert refused.value.field == "scope.store"
    assert not Case.objects.exists() and not events(Action.THREAD_BUILD)


# --- near-duplicates -----------------------------------------------------------------------------


def test_a_similar_case_of_the_same_scope_is_linked_on_submission(submit: Submit) -> None:
    first = submit(case_data(incident="INC-1"))
    second = submit(other_wording("INC-2"))
    link = NearDuplicate.objects.get()
    assert {link.case_a_id, link.case_b_id} == {first.id, second.id}
    assert link.case_a_id < link.case_b_id
    assert link.status == LinkStatus.OPEN and link.similarity >= 0.4
    assert [s.other.id for s in similar_cases(first)] == [second.id]


def test_an_agents_proposal_is_linked_too(submit: Submit, agent: User) -> None:
    first = submit(case_data(incident="INC-1"))
    proposed = submit(other_wording("INC-AGENT"), actor=agent, via="api")
    assert proposed.submitted_via == "api"
    assert NearDuplicate.objects.filter(case_b__in=[first, proposed]).exists()


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(lambda: unrelated("INC-2"), id="dissimilar"),
        pytest.param(
            lambda: other_wording("INC-2", scope={**SCOPE, "store": "store-009"}), id="other-store"
        ),
        pytest.param(
            lambda: other_wording("INC-2", scope={**SCOPE, "deployment": "release-2"}),
            id="other-release",
        ),
        pytest.param(lambda: other_wording("INC-1"), id="same-incident"),
    ],
)
def test_no_link_for_dissimilar_other_scope_or_same_incident(
    submit: Submit, second: Callable[[], dict[str, Any]]
) -> None:
    submit(case_data(incident="INC-1"))
    submit(second())
    assert not NearDuplicate.objects.exists()


def test_rejected_cases_are_not_linked_to(submit: Submit, second_reviewer: User) -> None:
    first = submit(case_data(incident="INC-1"))
    experience_services.case_reject(case=first, actor=second_reviewer, reason="duplicate")
    submit(other_wording("INC-2"))
    assert not NearDuplicate.objects.exists()


def test_recording_different_incidents_empties_the_pair_from_the_queue(
    submit: Submit, second_reviewer: User
) -> None:
    submit(case_data(incident="INC-1"))
    submit(other_wording("INC-2"))
    link = NearDuplicate.objects.get()
    incidents.near_duplicate_resolve(
        link=link, decision="different", actor=second_reviewer, reason="不同日期的两次故障"
    )
    link.refresh_from_db()
    assert link.status == LinkStatus.DIFFERENT and link.resolved_by == second_reviewer
    assert not NearDuplicate.objects.filter(status=LinkStatus.OPEN).exists()
    assert not IncidentMerge.objects.exists()
    (event,) = events(Action.NEAR_DUPLICATE_RESOLVE)
    assert event.details["decision"] == "different" and event.reason == "不同日期的两次故障"
    with pytest.raises(ValidationFailure, match="already"):
        incidents.near_duplicate_resolve(
            link=link, decision="different", actor=second_reviewer, reason="again"
        )


def test_same_incident_merges_the_ids_and_every_count_follows(
    approve: Callable[..., Case], reviewer: User, second_reviewer: User
) -> None:
    first = approve(case_data(incident="INC-1"))
    second = approve(other_wording("INC-2"))
    assert incident_support([first, second]).incidents == 2
    skill, _ = experience_services.skill_submit(
        content=parse_skill(skill_data([first.id, second.id]), tool_specs()), actor=reviewer
    )
    assert TOO_FEW_INCIDENTS not in experience_selectors.skill_approval_checklist(
        skill=skill, reviewer=second_reviewer, reason="ok", now=NOW
    )

    link = NearDuplicate.objects.get()
    incidents.near_duplicate_resolve(
        link=link,
        decision="same_incident",
        canonical="INC-1",
        actor=second_reviewer,
        reason="同一天同一门店，同一配置错误",
    )
    link.refresh_from_db()
    assert link.status == LinkStatus.SAME_INCIDENT
    merge = IncidentMerge.objects.get()
    assert (merge.alias, merge.canonical, merge.merged_by) == ("INC-2", "INC-1", second_reviewer)
    assert events(Action.INCIDENT_MERGE)[0].reason == "同一天同一门店，同一配置错误"

    # Confidence, the skill page's count and skill approval all count one incident now.
    assert incident_support([first, second]).incidents == 1
    cited = [experience_selectors.cited_case(c) for c in experience_selectors.skill_cases(skill)]
    assert {c.incident for c in cited} == {"INC-1"}
    assert TOO_FEW_INCIDENTS in experience_selectors.skill_approval_checklist(
        skill=skill, reviewer=second_reviewer, reason="ok", now=NOW
    )
    with pytest.raises(review.ReviewRefused) as refused:
        experience_services.skill_approve(
            skill=skill, actor=second_reviewer, reason="two incidents?"
        )
    assert TOO_FEW_INCIDENTS in refused.value.unmet


def test_the_kept_id_must_be_one_of_the_pair(submit: Submit, second_reviewer: User) -> None:
    submit(case_data(incident="INC-1"))
    submit(other_wording("INC-2"))
    with pytest.raises(ValidationFailure) as refused:
        incidents.near_duplicate_resolve(
            link=NearDuplicate.objects.get(),
            decision="same_incident",
            canonical="INC-9",
            actor=second_reviewer,
            reason="x",
        )
    assert refused.value.field == "canonical"
    assert not IncidentMerge.objects.exists()


def test_resolving_needs_a_reviewer_and_a_reason(
    submit: Submit, operator: User, second_reviewer: User
) -> None:
    submit(case_data(incident="INC-1"))
    submit(other_wording("INC-2"))
    link = NearDuplicate.objects.get()
    with pytest.raises(PermissionRefused):
        incidents.near_duplicate_resolve(
            link=link, decision="different", actor=operator, reason="x"
        )
    with pytest.raises(ValidationFailure) as refused:
        incidents.near_duplicate_resolve(
            link=link, decision="different", actor=second_reviewer, reason=" "
        )
    assert refused.value.field == "reason"


def test_chained_merges_keep_one_canonical_id_and_close_moot_pairs(
    submit: Submit, second_reviewer: User
) -> None:
    a = submit(case_data(incident="INC-1"))
    b = submit(other_wording("INC-2"))
    c = submit(case_data(incident="INC-3", summary="复盘：顾客在二号店小程序使用优惠券失败。"))
    assert NearDuplicate.objects.filter(status=LinkStatus.OPEN).count() >= 2
    incidents.incident_merge(
        tenant="teahouse",
        brand="leaf-and-cup",
        alias="INC-1",
        into="INC-2",
        actor=second_reviewer,
        reason="same",
    )
    incidents.incident_merge(
        tenant="teahouse",
        brand="leaf-and-cup",
        alias="INC-2",
        into="INC-3",
        actor=second_reviewer,
        reason="same again",
    )
    assert dict(IncidentMerge.objects.values_list("alias", "canonical")) == {
        "INC-1": "INC-3",
        "INC-2": "INC-3",
    }
    assert incident_support([a, b, c]).incidents == 1
    assert not NearDuplicate.objects.filter(status=LinkStatus.OPEN).exists()
    with pytest.raises(ValidationFailure, match="already"):
        incidents.incident_merge(
            tenant="teahouse",
            brand="leaf-and-cup",
            alias="INC-1",
            into="INC-3",
            actor=second_reviewer,
            reason="x",
        )


def test_merges_are_per_tenant_and_brand(submit: Submit, second_reviewer: User) -> None:
    ours = submit(case_data(incident="INC-1"))
    theirs = submit(case_data(incident="INC-2", scope={**SCOPE, "brand": "other-brand"}))
    incidents.incident_merge(
        tenant="teahouse",
        brand="other-brand",
        alias="INC-1",
        into="INC-2",
        actor=second_reviewer,
        reason="other brand's ids",
    )
    assert incident_support([ours, theirs]).incidents == 2


# --- re-review: staleness ------------------------------------------------------------------------

DAY = timedelta(days=1)


def test_an_approved_case_unused_for_the_window_enters_the_queue_once(
    approve: Callable[..., Case], frozen_clock: Callable[[datetime], Any], settings: Any
) -> None:
    settings.CURATION_STALE_AFTER_DAYS = 30
    case = approve(case_data(incident="INC-1"))
    assert scan.curation_scan(now=NOW + 29 * DAY).queued == []
    report = scan.curation_scan(now=NOW + 31 * DAY)
    (entry,) = report.queued
    assert (entry.item_id, entry.reason, entry.status) == (case.id, ReReviewReason.UNUSED, "open")
    assert scan.curation_scan(now=NOW + 32 * DAY).queued == []
    (event,) = events(Action.CURATION_SCAN)
    assert event.actor is None and event.actor_name == "system"
    assert event.details["rereview"] == [entry.pk] and event.details["stale_after_days"] == 30


def test_a_read_within_the_window_keeps_an_item_off_the_queue(
    approve: Callable[..., Case],
) -> None:
    case = approve(case_data(incident="INC-1"))
    Reference.objects.create(
        run_id="run-1", item_id=case.id, item_type="case", read_at=NOW + 80 * DAY
    )
    assert scan.curation_scan(now=NOW + 100 * DAY, days=90).queued == []
    assert [e.item_id for e in scan.curation_scan(now=NOW + 171 * DAY, days=90).queued] == [case.id]


def rule_document(version: int, *, approved: bool = True, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "doc_key": "rule-store",
        "version": version,
        "tenant": "teahouse",
        "brand": "leaf-and-cup",
        "stores": ["store-001", "store-002"],
        "campaign": "campaign-b",
        "kind": "rule",
        "title": f"活动B适用门店（第{version}版）",
        "text": "活动B适用门店与渠道。",
        "source": "fixture://knowledge/rule-store",
        "valid_from": "2026-09-01T00:00:00+08:00",
        "valid_to": None,
        "published_at": "2026-08-30T10:00:00+08:00",
        "approved": approved,
        "revoked": False,
        "requirements": {},
    }
    data.update(changes)
    return data


def citing_document(incident: str, version: int = 1, **changes: Any) -> dict[str, Any]:
    data = case_data(incident=incident, **changes)
    data["diagnosis"]["evidence"].append(
        {"source_id": f"doc:rule-store@{version}", "excerpt": "活动B适用门店与渠道。"}
    )
    return data


def test_a_newer_approved_version_of_a_cited_document_queues_the_case(
    approve: Callable[..., Case], operator: User
) -> None:
    documents_import(items=[rule_document(1)], actor=operator)
    case = approve(citing_document("INC-1"))
    documents_import(items=[rule_document(2, approved=False)], actor=operator)
    assert scan.curation_scan(days=365).queued == []  # a draft changes no rule yet
    Document.objects.filter(version=2).delete()
    documents_import(items=[rule_document(2)], actor=operator)
    (entry,) = scan.curation_scan(days=365).queued
    assert (entry.item_id, entry.reason) == (case.id, ReReviewReason.DOCUMENT_NEW_VERSION)
    assert (entry.document_id, entry.detail) == ("doc:rule-store@1", "doc:rule-store@2")
    assert scan.curation_scan(days=365).queued == []


def test_a_revoked_cited_document_queues_the_case(
    approve: Callable[..., Case], operator: User
) -> None:
    documents_import(items=[rule_document(1)], actor=operator)
    case = approve(citing_document("INC-1"))
    document_revoke(document=Document.objects.get(), actor=operator, reason="门店配置写错")
    (entry,) = scan.curation_scan(days=365).queued
    assert (entry.item_id, entry.reason, entry.document_id) == (
        case.id,
        ReReviewReason.DOCUMENT_REVOKED,
        "doc:rule-store@1",
    )


@pytest.mark.parametrize("change", ["revoked", "new_version"])
def test_the_scan_never_reports_another_tenants_document(
    approve: Callable[..., Case], operator: User, change: str
) -> None:
    """A case may cite any text as a source id; a document of another tenant under that id
    must not leak its state (revoked, or newer) into this tenant's re-review queue."""
    documents_import(items=[rule_document(1, tenant="othertea")], actor=operator)
    approve(citing_document("INC-1"))
    if change == "revoked":
        document_revoke(document=Document.objects.get(), actor=operator, reason="门店配置写错")
    else:
        documents_import(items=[rule_document(2, tenant="othertea")], actor=operator)
    assert scan.curation_scan(days=365).queued == []


def test_a_skill_cites_the_documents_its_runs_cited(
    approve: Callable[..., Case], reviewer: User, second_reviewer: User, operator: User
) -> None:
    first = approve(case_data(incident="INC-1"))
    second = approve(unrelated("INC-2"))
    skill, _ = experience_services.skill_submit(
        content=parse_skill(skill_data([first.id, second.id]), tool_specs()), actor=reviewer
    )
    experience_services.skill_approve(skill=skill, actor=second_reviewer, reason="two incidents")
    documents_import(items=[rule_document(1)], actor=operator)
    experience_run_records.run_store(
        run_id="run-1",
        skill_id=skill.id,
        scope=SCOPE,
        context={},
        steps=[],
        observations=[],
        cases=[first.id, second.id],
        status="needs_review",
        reason="",
        tool_calls=1,
        started_at=NOW,
        finished_at=NOW,
        cited_documents=["doc:rule-store@1"],
        actor=system_agent(),
    )
    document_revoke(document=Document.objects.get(), actor=operator, reason="写错")
    queued = scan.curation_scan(days=365).queued
    assert [(e.item_id, e.item_type, e.reason) for e in queued] == [
        (skill.id, "skill", ReReviewReason.DOCUMENT_REVOKED)
    ]


def test_recertification_is_a_reviewed_new_version_that_empties_the_queue(
    approve: Callable[..., Case],
    operator: User,
    reviewer: User,
    second_reviewer: User,
    frozen_clock: Callable[[datetime], Any],
) -> None:
    old = approve(case_data(incident="INC-1"))
    later = NOW + 100 * DAY
    frozen_clock(later)
    (entry,) = scan.curation_scan(days=90).queued
    new = rereview.rereview_recertify(
        entry=entry, valid_from=later, valid_to=later + 365 * DAY, actor=operator
    )
    assert new.status == Status.CANDIDATE and new.supersedes == old.id
    assert new.submitted_by == operator and new.id != old.id
    assert new.content["diagnosis"] == old.content["diagnosis"]
    entry.refresh_from_db()
    assert (entry.status, entry.new_item_id) == (ReReviewStatus.PENDING, new.id)
    (event,) = events(Action.REREVIEW_RECERTIFY)
    assert event.target == old.id and event.details["new_version"] == new.id
    # The old version stays approved and in use until the new one is reviewed.
    old.refresh_from_db()
    assert old.status == Status.APPROVED

    # The new version's evidence is unchecked: a reviewer checks it, then approves.
    with pytest.raises(review.ReviewRefused):
        experience_services.case_approve(case=new, actor=reviewer, reason="same as before")
    experience_services.evidence_check(case=new, key="diagnosis/0", actor=reviewer)
    experience_services.case_approve(
        case=new, actor=reviewer, reason="rechecked against today's rules"
    )
    old.refresh_from_db()
    entry.refresh_from_db()
    assert old.status == Status.SUPERSEDED and old.superseded_by == new.id
    assert (entry.status, entry.resolution) == (
        ReReviewStatus.CLOSED,
        ReReviewResolution.SUPERSEDED,
    )
    assert not ReReview.objects.filter(status__in=["open", "pending"]).exists()


def test_recertification_needs_a_future_validity_and_an_open_entry(
    approve: Callable[..., Case], operator: User, second_reviewer: User
) -> None:
    old = approve(case_data(incident="INC-1"))
    (entry,) = scan.curation_scan(now=NOW + 100 * DAY, days=90).queued
    with pytest.raises(ValidationFailure) as refused:
        rereview.rereview_recertify(
            entry=entry, valid_from=NOW - 30 * DAY, valid_to=NOW - DAY, actor=operator
        )
    assert refused.value.field == "valid_to"
    assert Case.objects.count() == 1
    experience_revocation.case_revoke(case=old, actor=second_reviewer, reason="wrong")
    with pytest.raises(ValidationFailure, match="not open"):
        rereview.rereview_recertify(
            entry=entry, valid_from=NOW, valid_to=NOW + 365 * DAY, actor=operator
        )


def test_revoking_the_item_closes_its_entries(
    approve: Callable[..., Case], second_reviewer: User
) -> None:
    case = approve(case_data(incident="INC-1"))
    (entry,) = scan.curation_scan(now=NOW + 100 * DAY, days=90).queued
    experience_revocation.case_revoke(
        case=case, actor=second_reviewer, reason="diagnosis was wrong"
    )
    entry.refresh_from_db()
    assert (entry.status, entry.resolution) == (ReReviewStatus.CLOSED, ReReviewResolution.REVOKED)


def test_a_reviewer_confirms_a_skill_and_it_leaves_the_queue_until_unused_again(
    approve: Callable[..., Case],
    reviewer: User,
    second_reviewer: User,
    operator: User,
    frozen_clock: Callable[[datetime], Any],
) -> None:
    first = approve(case_data(incident="INC-1"))
    second = approve(unrelated("INC-2"))
    skill, _ = experience_services.skill_submit(
        content=parse_skill(skill_data([first.id, second.id]), tool_specs()), actor=reviewer
    )
    experience_services.skill_approve(skill=skill, actor=second_reviewer, reason="ok")
    frozen_clock(NOW + 100 * DAY)
    entries = {e.item_id: e for e in scan.curation_scan(days=90).queued}
    skill_entry, case_entry = entries[skill.id], entries[first.id]
    with pytest.raises(PermissionRefused):
        rereview.rereview_confirm(entry=skill_entry, actor=operator, reason="fine")
    with pytest.raises(ValidationFailure, match="new version"):
        rereview.rereview_confirm(entry=case_entry, actor=second_reviewer, reason="fine")
    rereview.rereview_confirm(
        entry=skill_entry, actor=second_reviewer, reason="规则未变，步骤仍适用"
    )
    skill_entry.refresh_from_db()
    assert skill_entry.resolution == ReReviewResolution.CONFIRMED
    assert events(Action.REREVIEW_CONFIRM)[0].target == skill.id
    assert skill.id not in {e.item_id for e in scan.curation_scan(days=90).queued}
    frozen_clock(NOW + 191 * DAY)
    assert skill.id in {e.item_id for e in scan.curation_scan(days=90).queued}


def test_the_scan_closes_entries_whose_item_changed_by_other_means(
    approve: Callable[..., Case],
) -> None:
    case = approve(case_data(incident="INC-1"))
    (entry,) = scan.curation_scan(now=NOW + 100 * DAY, days=90).queued
    Case.objects.filter(pk=case.pk).update(status=Status.REVOKED)  # bypasses the services
    report = scan.curation_scan(now=NOW + 100 * DAY, days=90)
    assert [e.pk for e in report.closed] == [entry.pk]


# --- skill proposals -----------------------------------------------------------------------------


def two_incidents_sharing_a_document(approve: Callable[..., Case], operator: User) -> list[Case]:
    documents_import(items=[rule_document(1)], actor=operator)
    return [
        approve(citing_document("INC-1")),
        approve(
            citing_document(
                "INC-2",
                title="二号店水果茶券不可用：活动B门店",
                counterevidence=[
                    {
                        "hypothesis": "活动尚未生效",
                        "statement": "同一时间一号店可用。",
                        "refutes": "活动整体未生效",
                        "evidence": [{"source_id": "thread:9#m2", "excerpt": "一号店可以用。"}],
                    }
                ],
            )
        ),
    ]


def test_two_distinct_incidents_sharing_a_checked_document_propose_a_skill(
    approve: Callable[..., Case], operator: User
) -> None:
    cases = two_incidents_sharing_a_document(approve, operator)
    report = scan.curation_scan(days=365)
    (proposal,) = [p for p in report.proposals if p.pattern_kind == "document"]
    assert proposal.scope == SCOPE and proposal.pattern == "rule-store"
    assert proposal.case_ids == sorted(c.id for c in cases)
    assert proposal.incidents == ["INC-1", "INC-2"]
    assert proposal.recipe == [
        {"tool": "search_knowledge", "arguments": {"query": "活动B适用门店（第1版）"}}
    ]
    assert proposal.status == ProposalStatus.OPEN
    assert scan.curation_scan(days=365).proposals == []  # no duplicate proposal


def test_a_shared_refuted_hypothesis_is_a_pattern_too(approve: Callable[..., Case]) -> None:
    approve(case_data(incident="INC-1"))
    approve(unrelated("INC-2"))  # also refuted "缓存未刷新"
    (proposal,) = scan.curation_scan(days=365).proposals
    assert (proposal.pattern_kind, proposal.pattern) == ("hypothesis", "缓存未刷新")


def test_one_incident_summarised_twice_proposes_nothing(
    approve: Callable[..., Case], operator: User, second_reviewer: User
) -> None:
    cases = two_incidents_sharing_a_document(approve, operator)
    incidents.incident_merge(
        tenant="teahouse",
        brand="leaf-and-cup",
        alias="INC-2",
        into="INC-1",
        actor=second_reviewer,
        reason="one incident",
    )
    assert incident_support(cases).incidents == 1
    assert scan.curation_scan(days=365).proposals == []


def test_candidates_do_not_count_towards_a_proposal(
    submit: Submit, approve: Callable[..., Case]
) -> None:
    approve(case_data(incident="INC-1"))
    submit(unrelated("INC-2"))
    assert scan.curation_scan(days=365).proposals == []


def test_adopting_a_proposal_submits_a_candidate_that_someone_else_approves(
    approve: Callable[..., Case], operator: User, reviewer: User, second_reviewer: User
) -> None:
    cases = two_incidents_sharing_a_document(approve, operator)
    (proposal,) = [
        p for p in scan.curation_scan(days=365).proposals if p.pattern_kind == "document"
    ]
    skill = proposals.proposal_adopt(
        proposal=proposal,
        actor=reviewer,
        title="优惠券无法使用：核对活动B适用门店",
        when="小程序优惠券在某门店不可用时",
        queries=["活动B适用门店", "优惠券无法使用的适用条件"],
    )
    assert skill.status == Status.CANDIDATE and skill.submitted_by == reviewer
    assert sorted(skill.cases.values_list("id", flat=True)) == sorted(c.id for c in cases)
    assert [s["arguments"]["query"] for s in skill.recipe] == [
        "活动B适用门店",
        "优惠券无法使用的适用条件",
    ]
    assert skill.valid_to == min(c.valid_to for c in cases)
    proposal.refresh_from_db()
    assert (proposal.status, proposal.skill_id) == (ProposalStatus.ADOPTED, skill.id)
    assert events(Action.PROPOSAL_ADOPT)[0].details["proposal"] == proposal.pk

    with pytest.raises(review.ReviewRefused) as refused:
        experience_services.skill_approve(skill=skill, actor=reviewer, reason="mine")
    assert refused.value.unmet == [OWN_SUBMISSION]
    experience_services.skill_approve(skill=skill, actor=second_reviewer, reason="两次不同事故")
    assert Skill.objects.get(pk=skill.id).status == Status.APPROVED
    # A skill citing every supporting case covers the pattern: nothing is proposed again.
    assert scan.curation_scan(days=365).proposals == []


def test_an_adopted_recipe_is_validated_like_any_other(
    approve: Callable[..., Case], operator: User, reviewer: User
) -> None:
    two_incidents_sharing_a_document(approve, operator)
    (proposal,) = [
        p for p in scan.curation_scan(days=365).proposals if p.pattern_kind == "document"
    ]
    with pytest.raises(ValidationFailure, match="recipe"):
        proposals.proposal_adopt(proposal=proposal, actor=reviewer, title="t", when="w", queries=[])
    assert not Skill.objects.exists()
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.OPEN


def test_dismissing_a_proposal_needs_a_reviewer_and_a_reason(
    approve: Callable[..., Case], operator: User, second_reviewer: User
) -> None:
    two_incidents_sharing_a_document(approve, operator)
    proposal = SkillProposal.objects.filter(pattern_kind="document").first() or next(
        p for p in scan.curation_scan(days=365).proposals if p.pattern_kind == "document"
    )
    with pytest.raises(PermissionRefused):
        proposals.proposal_dismiss(proposal=proposal, actor=operator, reason="no")
    proposals.proposal_dismiss(proposal=proposal, actor=second_reviewer, reason="已有同类技能")
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.DISMISSED
    assert scan.curation_scan(days=365).proposals == []
