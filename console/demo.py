"""The demo world ``load_demo`` builds: enough data that every console page has something to show.

Everything is dated relative to the moment it is loaded, so the dashboard's "recently approved",
the re-review queue and the runs list look the same whichever day ``make run`` is started, and
every example the README prints (fixed ticket times in September 2026, memory approved before
the day it is run) works as printed. Each step is idempotent: loading twice changes nothing.

The story, oldest first (T is the moment of loading):

- T-20 days: the operator imports the demo knowledge base.
- T-14 days: the demo cases and skill are imported; a reviewer approves two cases of distinct
  incidents and the skill (``experience.demo``). A second reviewer approves the duty summary of
  the first incident as well, and a second skill citing it and the product-list case (T-13).
- T-12 days: a failure lesson and a success pattern of the same scene are approved: the two
  contradict each other, so a lesson conflict waits for a reviewer.
- T-10 days: the agent recalls experience and runs both skills (runs ``demo-recall-1``,
  ``demo-skill-run-1`` and ``demo-skill-run-2``) and reports the first skill run's outcome; a
  reviewer investigates a ticket. Each finished run's after-action review drafts a candidate case
  and a candidate lesson beside it, which wait in the review queue.
- T-9 days: the operator submits a prompt-form skill citing the two approved cases of distinct
  incidents (a constrained sub-agent that reads the customer's own words and checks the rules);
  a reviewer other than its author approves it, and the agent runs it once
  (``demo-prompt-skill-run-1``, through the investigation runner with the scripted provider).
- T-8 days: the operator imports the demo investigation thread and builds a candidate from it
  (a near-duplicate of the approved store-list case).
- T-3 days: the duty summary is revoked: the second skill becomes unavailable (the first stays
  available), and ``demo-recall-1`` and ``demo-skill-run-2``, which read it, wait for a follow-up.
- T-2 days: the operator submits the store manager's account of the first incident, written
  afresh: a candidate whose near duplicate is the approved store-list case, so a reviewer can
  compare the two word by word from the queue (``Compare and decide``) and approve or reject it.
- T: the curation scan runs (skill proposals, re-review, conflicts), and, unless skipped, the
  shipped held-out set is replayed against the demo memory and its report stored.

T is read from the clock once; every step hands its own moment to the services it calls (each
write takes ``now``), so the clock itself is never set.
"""

from __future__ import annotations

import copy
import io
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command

from curation import threads
from curation.domain.threads import (
    COUNTER_USES,
    DIAGNOSIS,
    OBSERVATION,
    OUTCOME,
    THREAD_SCOPE_FIELDS,
    CandidateDraft,
    CounterDraft,
    Pick,
)
from curation.scan import curation_scan
from evaluation.models import ReplayReport
from experience.cases import selectors, services
from experience.cases.executor import run_skill
from experience.cases.prompting import prompt_tools
from experience.cases.schema import TicketContext, evidence_objects, parse_case, parse_skill
from experience.cases.tools import tool_specs
from experience.core.models import Status
from experience.demo import (
    APPROVAL_REASON,
    DEMO_FACTS,
    DEMO_SCOPE,
    case_check_and_approve,
    load_demo_experience,
    load_demo_knowledge,
)
from experience.lessons import services as lessons
from experience.lessons.models import LessonConflict
from experience.lessons.schema import parse_lesson
from experience.retrieval.service import retrieve_experience
from experience.review import decisions, revocation
from experience.review.outcomes import run_outcome_report, run_read_items
from experience.runs.models import Run
from investigations.models import Investigation
from investigations.services import investigation_run
from knowledge.models import Synonym
from knowledge.services import synonym_set
from reviewconsole import clock
from reviewconsole.cli import read_json_file
from reviewconsole.roles import Role
from reviewconsole.services import user_role, user_set_role
from reviewconsole.timeparse import parse_aware_datetime

# Demo accounts only: anyone who reads this file knows these passwords.
DEMO_USERS = (
    ("rita", Role.REVIEWER, "demo-rita-reviews"),
    ("ravi", Role.REVIEWER, "demo-ravi-reviews"),
    ("olivia", Role.OPERATOR, "demo-olivia-operates"),
    ("ada", Role.ADMIN, "demo-ada-audits"),
    ("agent-7", Role.AGENT, "demo-agent-7-searches"),
)
DEMO_EMAIL_DOMAIN = "example.com"

FIXTURES = Path(settings.BASE_DIR) / "fixtures"
THREAD_FIXTURE = FIXTURES / "threads" / "coupon-store-scope.json"
HELDOUT_FIXTURE = FIXTURES / "heldout" / "tickets.json"

# The fixture's items (experience.json) by index.
FIRST_CASE, SECOND_CASE, DUTY_SUMMARY = 0, 1, 2

SECOND_SKILL_RUN = "demo-skill-run-2"
RECALL_RUN = "demo-recall-1"
RECALL_LIMIT = 10  # every approved item of the scope: the run reads the case revoked later
SKILL_RUN = "demo-skill-run-1"
INVESTIGATION_RUN = "demo-investigation-1"
PROMPT_SKILL_RUN = "demo-prompt-skill-run-1"
TICKET = "两杯水果茶，优惠券用不了"
TICKET_OCCURRED_AT = "2026-09-18T14:00:00+08:00"
TICKET_KNOWN_AT = "2026-09-18T14:10:00+08:00"

SUMMARY_REVOCATION_REASON = (
    "复盘摘要的门店结论未与后台变更记录核对，撤销以停止复用；读过它的运行需要复核"
)
CHECK_NOTE = "演示：摘录与原始记录一致"
SECOND_SKILL_APPROVAL_REASON = "引用两个不同事故的已批准案例（含值班复盘摘要），只读一步"
LESSON_APPROVAL_REASON = "引用的案例已批准且属于本范围"
SCENE = {"tags": ["优惠券", "小程序", "门店"], "description": "小程序优惠券在某门店无法使用"}
LESSON_VALID_FROM = "2026-09-01T00:00:00+08:00"
LESSON_VALID_TO = "2028-12-31T00:00:00+08:00"

# The demo lexicon's bilingual pairs: the English words a question about the demo's (Chinese)
# rules and cases uses, rewritten to the words those use, so the expanded branch finds them
# across languages. Operators edit them on the lexicon page.
DEMO_LEXICON = {
    "fruit tea": "水果茶",
    "milk tea": "奶茶",
    "voucher": "优惠券",
    "mini program": "miniapp",
    "mini-program": "miniapp",
    "miniprogram": "miniapp",
    "minimum spend": "门槛",
    "threshold": "门槛",
    "campaign": "活动",
    "promotion": "活动",
    "channel": "渠道",
    "went live": "上线",
    "go live": "上线",
    "cannot be used": "无法使用",
    "can't be used": "无法使用",
    "can't use": "无法使用",
    "cannot use": "无法使用",
    "doesn't work": "无法使用",
    "does not work": "无法使用",
    "not working": "无法使用",
    "won't work": "无法使用",
}

# Days before the moment of loading at which each step happens.
KNOWLEDGE_DAYS = 20
EXPERIENCE_DAYS = 14
SECOND_SKILL_DAYS = 13
LESSON_DAYS = 12
RUN_DAYS = 10
PROMPT_SKILL_DAYS = 9
THREAD_DAYS = 8
THREAD_APPROVAL_DAYS = 6
REVOKE_DAYS = 3
RECURRENCE_DAYS = 2


def _days_ago(now: datetime, days: float) -> datetime:
    return now - timedelta(days=days)


def demo_users(now: datetime | None = None) -> dict[str, User]:
    users = {}
    for name, role, password in DEMO_USERS:
        user = User.objects.filter(username=name).first()
        if user is None or user_role(user) != role or not user.check_password(password):
            user = user_set_role(username=name, role=role, password=password, now=now)
        if role != Role.AGENT and not user.email:
            # Reviewers' notifications need an address (the console's mail backend prints them).
            user.email = f"{name}@{DEMO_EMAIL_DOMAIN}"
            user.save(update_fields=["email"])
        users[name] = user
    return users


def _lesson(lesson_type: str, conclusion: str, precondition: str, supports: list[str]) -> Any:
    return parse_lesson(
        {
            "type": "lesson",
            "lesson_type": lesson_type,
            "scope": dict(DEMO_SCOPE),
            "scene": dict(SCENE),
            "precondition": precondition,
            "conclusion": conclusion,
            "supports": supports,
            "valid_from": LESSON_VALID_FROM,
            "valid_to": LESSON_VALID_TO,
        }
    )


def _lessons(*, cases: list[str], submitter: User, reviewer: User, now: datetime) -> list[str]:
    """A failure lesson and a success pattern of one scene: a conflict a reviewer resolves."""
    contents = [
        _lesson(
            "failure_lesson",
            "不要先让顾客刷新缓存；先核对活动的适用门店配置",
            "活动规则限定了适用门店，刷新后仍提示当前门店不支持该券",
            [cases[0]],
        ),
        _lesson(
            "success_pattern",
            "先让顾客退出小程序重新进入，刷新优惠券缓存",
            "小程序刚发过补丁，优惠券显示不可用",
            [cases[1]],
        ),
    ]
    ids = []
    for content in contents:
        lesson, _ = lessons.lesson_submit(content=content, actor=submitter, now=now)
        if lesson.status == Status.CANDIDATE:
            decisions.lesson_approve(
                lesson=lesson, actor=reviewer, reason=LESSON_APPROVAL_REASON, now=now
            )
        ids.append(lesson.id)
    return ids


def _ticket_context() -> TicketContext:
    return TicketContext(
        occurred_at=parse_aware_datetime(TICKET_OCCURRED_AT, field="occurred_at"),
        known_at=parse_aware_datetime(TICKET_KNOWN_AT, field="known_at"),
        facts=dict(DEMO_FACTS),
    )


def _runs(*, skills: list[str], agent: User, reviewer: User, now: datetime) -> list[str]:
    skill, second_skill = skills
    made = []
    if not run_read_items(RECALL_RUN):
        retrieve_experience(TICKET, DEMO_SCOPE, now, RECALL_RUN, RECALL_LIMIT, actor=agent)
        made.append(RECALL_RUN)
    if not Run.objects.filter(run_id=SKILL_RUN).exists():
        run_skill(skill, DEMO_SCOPE, _ticket_context(), SKILL_RUN, actor=agent, at=now)
        run_outcome_report(
            run_id=SKILL_RUN,
            outcome="resolved_by_lead",
            actor=agent,
            note="演示：按技能核对适用门店后确认漏配",
            now=now,
        )
        made.append(SKILL_RUN)
    if not Run.objects.filter(run_id=SECOND_SKILL_RUN).exists():
        # Reads the duty summary, revoked later: this run is flagged for a follow-up.
        run_skill(
            second_skill, DEMO_SCOPE, _ticket_context(), SECOND_SKILL_RUN, actor=agent, at=now
        )
        made.append(SECOND_SKILL_RUN)
    if not Investigation.objects.filter(run_id=INVESTIGATION_RUN).exists():
        context = _ticket_context()
        investigation_run(
            actor=reviewer,
            text=TICKET,
            scope=DEMO_SCOPE,
            occurred_at=context.occurred_at,
            known_at=context.known_at,
            facts=context.facts,
            run_id=INVESTIGATION_RUN,
            at=now,
        )
        made.append(INVESTIGATION_RUN)
    return made


def _thread_candidate(*, operator: User, now: datetime) -> dict[str, Any]:
    """Import the demo thread and build the candidate an operator would from it."""
    data = read_json_file(str(THREAD_FIXTURE))
    # Where the thread happened, as an intake tool would pass it on: the builder starts from it.
    data["scope"] = {name: DEMO_SCOPE[name] for name in THREAD_SCOPE_FIELDS}
    thread, imported = threads.thread_import(data=data, actor=operator, now=now)
    picks = [
        Pick("m1", OBSERVATION),
        Pick("m4", OBSERVATION),
        Pick("m8", DIAGNOSIS),
        Pick("m8/attachment-1", DIAGNOSIS),
        Pick("m5", COUNTER_USES[0]),
        Pick("m10", OUTCOME),
    ]
    draft = CandidateDraft(
        scope=dict(DEMO_SCOPE),
        # Typed without knowing the approved case's incident id: the near-duplicate check
        # pairs the two, and a reviewer merges the incidents.
        incident="INC-20260918-T-store-002",
        title="二号店小程序优惠券无法使用：活动B适用门店漏配（排查线程）",
        summary="活动B上线当天，二号店顾客在小程序购买两杯水果茶，优惠券提示无法使用。"
        "先怀疑缓存，后经运营核对配置，确认二号店未加入活动B的适用门店。",
        valid_from="2026-09-18T14:02:00+08:00",
        valid_to="2028-12-31T00:00:00+08:00",
        diagnosis="活动B后台的适用门店列表缺少二号店，二号店订单因门店范围不符被拒绝使用优惠券。",
        counterevidence=(
            CounterDraft(
                hypothesis="优惠券缓存未刷新",
                statement="顾客刷新两次并重新登录后仍失败，同一时间一号店同券正常。",
                refutes="排除客户端缓存；服务端缓存未单独排除。",
            ),
        ),
        outcome="补配二号店后顾客下单成功。",
    )
    case, built = threads.candidate_build(
        thread=thread, picks=picks, draft=draft, actor=operator, now=now
    )
    return {"thread": thread.thread_id, "imported": imported, "case": case.id, "built": built}


# The store manager's account of the first incident: the approved store-list case told again
# in other words (a candidate until a reviewer decides, linked to it by near-duplicate detection).
RECURRENCE_CHANGES: dict[str, Any] = {
    # Typed by the store without the approved case's incident id, as the thread's was.
    "incident": "INC-20260918-store-002-manager-note",
    "title": "二号店小程序优惠券被拒：活动B门店范围缺少二号店（店长补记）",
    "summary": "活动B上线当天，二号店顾客用小程序买两杯水果茶，优惠券被拒。店长先以为是缓存，"
    "后经运营核对配置，确认二号店没有加入活动B的适用门店。",
}
RECURRENCE_DIAGNOSIS = (
    "活动B后台的适用门店列表漏掉了 store-002，二号店订单因门店范围不符无法使用优惠券。"
)
RECURRENCE_OUTCOME = "运营补充门店范围后，顾客重新下单成功，店长已告知店员。"


def _recurrence_candidate(*, submitter: User, now: datetime) -> dict[str, Any]:
    """Submit the store manager's account: the first case's content in other words, evidence
    unchecked, so it waits in the queue beside the approved case it resembles."""
    items = read_json_file(str(FIXTURES / "experience.json"))
    data = copy.deepcopy(items[FIRST_CASE])
    data.update(RECURRENCE_CHANGES)
    data["diagnosis"]["statement"] = RECURRENCE_DIAGNOSIS
    data["outcome"]["statement"] = RECURRENCE_OUTCOME
    for evidence in evidence_objects(data):
        evidence.pop("verified", None)
    case, created = services.case_submit(content=parse_case(data), actor=submitter, now=now)
    return {"case": case.id, "created": created}


def _second_skill(*, cases: list[str], operator: User, reviewer: User, now: datetime) -> str:
    """A skill citing the duty summary and the product-list case (two incidents): revoking the
    summary later makes it unavailable, while the fixture's skill stays available."""
    content = parse_skill(
        {
            "type": "skill",
            "scope": dict(DEMO_SCOPE),
            "title": "新活动上线后券不可用：先核对适用门店与活动商品",
            "when": "活动上线当天某门店用券失败时，先核对活动的适用门店列表和活动商品列表。",
            "recipe": [
                {"tool": "search_knowledge", "arguments": {"query": "活动适用门店 活动商品"}}
            ],
            "cases": cases,
            "valid_from": LESSON_VALID_FROM,
            "valid_to": LESSON_VALID_TO,
        },
        tool_specs(),
    )
    skill, _ = services.skill_submit(content=content, actor=operator, now=now)
    if skill.status == Status.CANDIDATE:
        decisions.skill_approve(
            skill=skill, actor=reviewer, reason=SECOND_SKILL_APPROVAL_REASON, now=now
        )
    return skill.id


PROMPT_SKILL_APPROVAL_REASON = (
    "引用两个不同事故的已批准案例；只用只读的知识检索，最多三次调用，输出结构已核对"
)
PROMPT_COMPLAINT = (
    "昨天下午在二号店小程序点了两杯水果茶，一共32块，活动券一直显示不可用，到底怎么回事？"
)
PROMPT_SKILL: dict[str, Any] = {
    "title": "顾客原话里的用券失败：按当前活动规则判断",
    "when": "顾客用自己的话描述小程序用券失败（商品、渠道、金额混在一段话里）时，先按当前活动规则判断能否解释。",
    "prompt": {
        "instructions": (
            "你是门店用券失败的排查助手。从顾客原话里读出商品、渠道和金额，只把它们当作搜索线索，"
            "不改动工单的事实。用 search_knowledge 搜索当前活动的用券规则，只引用工具返回的规则原文；"
            "历史案例只是线索，不能当作原因。规则不覆盖这次购买时给出 rules_exclude_purchase；"
            "规则全部匹配时给出 rules_do_not_explain，并建议核对真实配置和结账请求。"
        ),
        "inputs": {
            "type": "object",
            "properties": {
                "complaint": {
                    "type": "string",
                    "maxLength": 1000,
                    "description": "顾客的原话（非结构化）",
                }
            },
            "required": ["complaint"],
        },
        "output": {
            "type": "object",
            "properties": {
                "conclusion_code": {
                    "type": "string",
                    "enum": [
                        "rules_exclude_purchase",
                        "rules_do_not_explain",
                        "ask_for_facts",
                        "check_campaign_configuration",
                        "knowledge_has_no_answer",
                        "lead_needs_review",
                    ],
                    "description": "规则允许的结论",
                },
                "rule_ids": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": 5,
                    "description": "引用的规则",
                },
                "summary": {
                    "type": "string",
                    "maxLength": 300,
                    "description": "给值班同学的一句话",
                },
            },
            "required": ["conclusion_code", "rule_ids"],
        },
        "tools": ["search_knowledge"],
        "max_calls": 3,
    },
}


def _prompt_skill(
    *, cases: list[str], operator: User, reviewer: User, agent: User, now: datetime
) -> str:
    """The prompt-form skill: submitted by the operator, approved by a reviewer (four eyes) on
    two approved cases of distinct incidents, then run once by the agent."""
    content = parse_skill(
        {
            "type": "skill",
            "scope": dict(DEMO_SCOPE),
            **PROMPT_SKILL,
            "cases": cases,
            "valid_from": LESSON_VALID_FROM,
            "valid_to": LESSON_VALID_TO,
        },
        tool_specs(),
        prompt_tools(),
    )
    skill, _ = services.skill_submit(content=content, actor=operator, now=now)
    if skill.status == Status.CANDIDATE:
        decisions.skill_approve(
            skill=skill, actor=reviewer, reason=PROMPT_SKILL_APPROVAL_REASON, now=now
        )
    if not Run.objects.filter(run_id=PROMPT_SKILL_RUN).exists():
        run_skill(
            skill.id,
            DEMO_SCOPE,
            _ticket_context(),
            PROMPT_SKILL_RUN,
            actor=agent,
            at=now,
            inputs={"complaint": PROMPT_COMPLAINT},
        )
    return skill.id


def _approve_checked(case_id: str, *, reviewer: User, now: datetime) -> None:
    """``reviewer`` checks the case's diagnosis evidence and approves it, if still a candidate."""
    case_check_and_approve(
        selectors.case_get(case_id),
        reviewer=reviewer,
        reason=APPROVAL_REASON,
        note=CHECK_NOTE,
        now=now,
    )


def _demo_lexicon(operator: User, now: datetime) -> None:
    """The demo's bilingual pairs, set by its operator (audited) where not already so."""
    have = dict(Synonym.objects.filter(term__in=DEMO_LEXICON).values_list("term", "canonical"))
    for term, canonical in DEMO_LEXICON.items():
        if have.get(term) != canonical:
            synonym_set(term=term, canonical=canonical, actor=operator, now=now)


def load_demo_world(*, now: datetime | None = None) -> dict[str, Any]:
    """Load the demo world into the current database (idempotent); return what it holds."""
    now = (now or clock.now()).replace(second=0, microsecond=0)
    users = demo_users(now)
    operator, reviewer, second = users["olivia"], users["rita"], users["ravi"]
    _demo_lexicon(operator, _days_ago(now, KNOWLEDGE_DAYS))
    knowledge = load_demo_knowledge(operator=operator, now=_days_ago(now, KNOWLEDGE_DAYS))
    at = _days_ago(now, EXPERIENCE_DAYS)
    experience = load_demo_experience(operator=operator, reviewer=reviewer, now=at)
    summary_id = experience["items"][DUTY_SUMMARY]["id"]
    _approve_checked(summary_id, reviewer=second, now=at)
    cases = [experience["items"][i]["id"] for i in (FIRST_CASE, SECOND_CASE)]
    second_skill = _second_skill(
        cases=[summary_id, cases[1]],
        operator=operator,
        reviewer=reviewer,
        now=_days_ago(now, SECOND_SKILL_DAYS),
    )
    lesson_ids = _lessons(
        cases=cases, submitter=second, reviewer=reviewer, now=_days_ago(now, LESSON_DAYS)
    )
    runs = _runs(
        skills=[experience["skill"], second_skill],
        agent=users["agent-7"],
        reviewer=reviewer,
        now=_days_ago(now, RUN_DAYS),
    )
    prompt_skill = _prompt_skill(
        cases=cases,
        operator=operator,
        reviewer=reviewer,
        agent=users["agent-7"],
        now=_days_ago(now, PROMPT_SKILL_DAYS),
    )
    thread = _thread_candidate(operator=operator, now=_days_ago(now, THREAD_DAYS))
    _approve_checked(thread["case"], reviewer=reviewer, now=_days_ago(now, THREAD_APPROVAL_DAYS))
    summary = selectors.case_get(summary_id)
    if summary.status == Status.APPROVED:
        revocation.case_revoke(
            case=summary,
            actor=reviewer,
            reason=SUMMARY_REVOCATION_REASON,
            now=_days_ago(now, REVOKE_DAYS),
        )
    recurrence = _recurrence_candidate(submitter=operator, now=_days_ago(now, RECURRENCE_DAYS))
    scan = curation_scan(now=now)
    return {
        "users": [
            {"username": name, "role": str(role), "password": password}
            for name, role, password in DEMO_USERS
        ],
        "knowledge": knowledge,
        "experience": experience,
        "revoked": summary_id,
        "lessons": lesson_ids,
        "conflicts": LessonConflict.objects.count(),
        "runs": {
            "new": runs,
            "ids": [RECALL_RUN, SKILL_RUN, SECOND_SKILL_RUN, INVESTIGATION_RUN, PROMPT_SKILL_RUN],
        },
        "skills": [experience["skill"], second_skill],
        "prompt_skill": prompt_skill,
        "thread": thread,
        "recurrence": recurrence,
        "scan": scan.as_json(),
        "replay_report": None,
    }


def demo_replay_report(now: datetime | None = None) -> int:
    """The stored report of the shipped held-out set replayed against the demo memory; made
    once (the replay runs on a temporary database in another process, so call this outside a
    transaction)."""
    report = ReplayReport.objects.order_by("pk").first()
    if report is None:
        moment = (now or clock.now()).replace(second=0, microsecond=0)
        call_command(
            "replay",
            str(HELDOUT_FIXTURE),
            memory="demo",
            as_user="ada",
            at=moment - timedelta(hours=1),
            stdout=io.StringIO(),
        )
        report = ReplayReport.objects.order_by("pk").get()
    return report.pk
