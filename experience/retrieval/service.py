"""``retrieve_experience``: exact scope gate, lexical ranking, one Reference per read."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction

from experience.cases.models import Case, Skill
from experience.core import domain
from experience.core.models import ItemType, Status
from experience.index import postings as experience_postings
from experience.index.postings import skill_text
from experience.lessons.outcome_tallies import OutcomeBatch
from experience.lessons.selectors import CaseTimes, skill_evidence_rows
from experience.retrieval.recall import Recallable, recallable_lessons, with_confidence
from experience.runs.claims import run_claim
from experience.runs.records import references_record, validate_run_id
from knowledge import postings
from knowledge.domain import expand, rank_branch, reciprocal_rank_fusion, tokenize
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.permissions import USE_EXPERIENCE, require, require_scope

if TYPE_CHECKING:
    from django.contrib.auth.models import User

OK = "ok"
FALLBACK = "fallback"
DEFAULT_LIMIT = 3
MAX_LIMIT = 20
MAX_QUERY = 2_000
USE_REFUSED = "retrieving experience needs the agent or reviewer role"
LIMIT_INVALID = f"must be an integer from 1 to {MAX_LIMIT}"
# How many more cases and skills than asked for have their outcomes read with the lessons'.
OUTCOMES_MARGIN = 2


def _validate(query: object, limit: object, now: datetime) -> None:
    if not isinstance(query, str) or not query.strip():
        raise ValidationFailure("query", "must be a non-empty string")
    if len(query) > MAX_QUERY:
        raise ValidationFailure("query", f"must be at most {MAX_QUERY} characters")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationFailure("limit", LIMIT_INVALID)
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValidationFailure("now", "must be timezone-aware")


def gated_cases(scope: Mapping[str, str], now: datetime) -> Any:
    return Case.objects.filter(
        status=Status.APPROVED,
        valid_from__lte=now,
        valid_to__gt=now,
        approved_at__lte=now,
        **{name: scope[name] for name in domain.SCOPE_FIELDS},
    )


def gated_skills(scope: Mapping[str, str], now: datetime) -> list[tuple[str, str, str]]:
    """``(id, title, when)`` of skills that pass the gate *and* whose cited cases are usable now."""
    skills = list(
        Skill.objects.filter(
            status=Status.APPROVED,
            valid_from__lte=now,
            valid_to__gt=now,
            approved_at__lte=now,
            **{name: scope[name] for name in domain.SCOPE_FIELDS},
        ).values_list("id", "title", "when")
    )
    if not skills:
        return []
    usable = usable_skills([s[0] for s in skills], now)
    return [s for s in skills if s[0] in usable]


def retrieve_experience(
    query: str,
    scope: Mapping[str, str | None],
    now: datetime,
    run_id: str,
    limit: int = DEFAULT_LIMIT,
    *,
    actor: User,
) -> dict[str, Any]:
    require(actor, USE_EXPERIENCE, message=USE_REFUSED)
    _validate(query, limit, now)
    run_id = validate_run_id(run_id)
    domain.given_scope_checked(scope)
    missing = domain.missing_scope(scope)
    if missing:
        return {"status": FALLBACK, "missing": missing, "items": []}
    exact = {name: str(scope[name]).strip() for name in domain.SCOPE_FIELDS}
    # The tenant is checked here, as the context block checks it, whoever calls.
    require_scope(actor, USE_EXPERIENCE, exact["tenant"], message=USE_REFUSED)

    found = experience_postings.candidates(exact, now, query)
    outcomes = OutcomeBatch(now, likely_returned(found, limit))
    lessons = recallable_lessons(exact, now, outcomes, candidate_lessons(found))
    ranked = ranked_from(found, query, exact, now, lessons, limit)
    items = [{"id": i, "type": kind, "title": title} for i, kind, title in ranked]
    items = with_confidence(items, lessons, now, outcomes, indexed_cases(found, items))
    # Claimed whatever was found, so a refusal never depends on what the scope holds.
    with transaction.atomic():
        run_claim(run_id=run_id, actor=actor, tenant=exact["tenant"], at=clock.now())
        if items:
            references_record(
                run_id=run_id,
                items=[(item["id"], ItemType(item["type"])) for item in items],
                at=clock.now(),
            )
    return {"status": OK, "missing": [], "items": items}


# --- ranking: from the index, or from the texts while the index is behind the lexicon ---------


def ranked_items(
    query: str, scope: Mapping[str, str], now: datetime, lessons: Mapping[str, Recallable]
) -> list[tuple[str, str, str]]:
    """``(id, kind, title)`` of every item of ``scope`` past the gate that shares a token with
    ``query``, ranked as ``experience.core.domain.rank_items`` ranks their texts: cases, skills whose
    cited cases are usable, and the recallable ``lessons``."""
    return ranked_from(
        experience_postings.candidates(scope, now, query), query, scope, now, lessons
    )


def ranked_from(
    found: experience_postings.Found | None,
    query: str,
    scope: Mapping[str, str],
    now: datetime,
    lessons: Mapping[str, Recallable],
    limit: int | None = None,
) -> list[tuple[str, str, str]]:
    """:func:`ranked_items` from candidates already read (None: rank from the texts); the first
    ``limit`` when given."""
    if found is None:
        return _ranked_from_texts(query, scope, now, lessons)[:limit]
    skill_ids = [c.item_id for c in found.items if c.kind == ItemType.SKILL]
    usable = usable_skills(skill_ids, now) if skill_ids else set()
    admitted = [
        c
        for c in found.items
        if c.kind == ItemType.CASE
        or (c.kind == ItemType.SKILL and c.item_id in usable)
        or (c.kind == ItemType.LESSON and c.item_id in lessons)
    ]
    by_id = {c.item_id: c for c in admitted}
    return [(i, by_id[i].kind, by_id[i].title) for i in found.ranked(by_id, limit)]


def candidate_lessons(
    found: experience_postings.Found | None,
) -> dict[str, experience_postings.Candidate] | None:
    """The lessons the index found for the query, with their entries (None: every lesson of
    the scope, when the ranking is read from the texts): no other can be returned."""
    if found is None:
        return None
    return {c.item_id: c for c in found.items if c.kind == ItemType.LESSON}


def likely_returned(found: experience_postings.Found | None, limit: int) -> list[str]:
    """The cases and skills a call will most likely return: the first of each ranking branch
    among them (unfused: fusing costs more than the guess saves). Their outcomes are read with
    the lessons' in one statement; should the call return another, the batch reads it then (the
    answer never depends on this guess)."""
    if found is None:
        return []
    others = {c.item_id for c in found.items if c.kind != ItemType.LESSON}
    return found.leading(others, limit + OUTCOMES_MARGIN)


def indexed_cases(
    found: experience_postings.Found | None, items: list[dict[str, Any]]
) -> dict[str, CaseTimes]:
    """The gate times of the returned ``items``' cases as the index gave them (they are approved
    and past the gate): their confidence needs nothing more of their rows."""
    if found is None:
        return {}
    wanted = {item["id"] for item in items if item["type"] == ItemType.CASE}
    return {c.item_id: c.gate_times() for c in found.items if c.item_id in wanted}


def usable_skills(skill_ids: list[str], now: datetime) -> set[str]:
    """The skills among ``skill_ids`` whose cited cases are all usable at ``now`` (one compiled
    statement, the one their confidence is read from)."""
    cited: dict[str, bool] = {}
    for skill_id, _approved, _case, status, _inc, valid_from, valid_to, _at in skill_evidence_rows(
        skill_ids
    ):
        usable = status == Status.APPROVED and valid_from <= now < valid_to
        cited[skill_id] = cited.get(skill_id, True) and usable
    return {skill_id for skill_id, usable in cited.items() if usable}


def _ranked_from_texts(
    query: str, scope: Mapping[str, str], now: datetime, lessons: Mapping[str, Recallable]
) -> list[tuple[str, str, str]]:
    """The same ranking read from every gated item's text (the reference the index is tested
    against, and what answers while a scope's expanded postings are behind the lexicon)."""
    titles: dict[str, tuple[str, str]] = {}
    texts: list[tuple[str, str]] = []
    for case_id, title, text in gated_cases(scope, now).values_list("id", "title", "search_text"):
        titles[case_id] = ("case", title)
        texts.append((case_id, text))
    for skill_id, title, when in gated_skills(scope, now):
        titles[skill_id] = ("skill", title)
        texts.append((skill_id, skill_text(title, when)))
    for lesson in lessons.values():
        titles[lesson.id] = ("lesson", lesson.title)
        texts.append((lesson.id, lesson.search_text))
    ranked = _ranked(query, texts) if texts else []
    return [(i, titles[i][0], titles[i][1]) for i in ranked]


# --- token sets cached per item (the ranking from texts) --------------------------------------

# Case and skill ids hash their content, so an id's token sets never change; only a lexicon
# change (a new stamp) changes the expanded ones. Each query then tokenizes only itself and the
# items it has not met before. Bounded, so a long-running process keeps a steady footprint.
_TOKEN_CACHE_SIZE = 50_000
_tokens: OrderedDict[str, tuple[frozenset[str], frozenset[str]]] = OrderedDict()
_tokens_stamp: list[str | None] = [None]


def _item_tokens(
    item_id: str, text: str, lexicon: Mapping[str, str]
) -> tuple[frozenset[str], frozenset[str]]:
    cached = _tokens.get(item_id)
    if cached is None:
        cached = (tokenize(text), tokenize(expand(text, lexicon)))
        _tokens[item_id] = cached
        if len(_tokens) > _TOKEN_CACHE_SIZE:
            _tokens.popitem(last=False)
    return cached


def _ranked(query: str, texts: list[tuple[str, str]]) -> list[str]:
    """Ids ranked as ``experience.core.domain.rank_items`` ranks them (raw + expanded, RRF)."""
    stamp, lexicon = postings.lexicon_for(postings.lexicon_stamp())
    if stamp is None or stamp != _tokens_stamp[0]:
        _tokens.clear()
        _tokens_stamp[0] = stamp
    sets = [(item_id, _item_tokens(item_id, text, lexicon)) for item_id, text in texts]
    raw = rank_branch(tokenize(query), ((i, t[0]) for i, t in sets))
    expanded = rank_branch(tokenize(expand(query, lexicon)), ((i, t[1]) for i, t in sets))
    return reciprocal_rank_fusion([raw, expanded])
