"""The paraphrase set (``fixtures/paraphrase/``) is well formed: every label names an item that
exists and that the query's scope admits at the query's times, the scopes asked about hold
dozens of items, and no query copies the text it should find.

Pure: the files are read and parsed with the importers' own parsers, and the knowledge gate is
``knowledge.domain.admits``; nothing is searched (labels are judged by meaning, never by what a
search returns).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from console.demo import FIRST_CASE, SECOND_CASE
from experience.cases.schema import CaseContent, parse_case
from knowledge.domain import DocumentGateFields, Scope, admits
from knowledge.schema import DocumentImport, parse_document
from reviewconsole.timeparse import parse_aware_datetime

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
PARAPHRASE = FIXTURES / "paraphrase"
DEMO_SOURCE = Path(__file__).resolve().parents[2] / "console" / "demo.py"

# The case ``load_demo`` builds from the demo thread and approves (console/demo.py): its title,
# and the scope and validity it is built with.
DEMO_THREAD_CASE = "二号店小程序优惠券无法使用：活动B适用门店漏配（排查线程）"
DEMO_SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}
DEMO_THREAD_VALIDITY = ("2026-09-18T14:02:00+08:00", "2028-12-31T00:00:00+08:00")
DOZENS = 24
MIN_QUERIES, MIN_KNOWLEDGE, MIN_EXPERIENCE = 40, 30, 10
STYLES = {"synonym", "colloquial", "abbreviation", "mixed"}


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _documents() -> list[DocumentImport]:
    raw = _read(FIXTURES / "knowledge.json") + _read(PARAPHRASE / "knowledge.json")
    return [parse_document(item) for item in raw]


@dataclass(frozen=True)
class Approved:
    scope: dict[str, str]
    valid_from: datetime
    valid_to: datetime
    text: str  # what retrieval ranks it by

    def admitted(self, scope: dict[str, str], at: datetime) -> bool:
        return self.scope == scope and self.valid_from <= at < self.valid_to


def _approved(case: CaseContent) -> Approved:
    return Approved(dict(case.scope), case.valid_from, case.valid_to, case.search_text())


def _paraphrase_cases() -> list[CaseContent]:
    return [parse_case(item) for item in _read(PARAPHRASE / "experience.json")]


def _approved_cases() -> dict[str, Approved]:
    """The cases approved once the demo and the paraphrase set are loaded, by title: the demo's
    two approved fixture cases, the case built from its thread, and every paraphrase case."""
    demo = _read(FIXTURES / "experience.json")
    cases = [parse_case(demo[i]) for i in (FIRST_CASE, SECOND_CASE)] + _paraphrase_cases()
    approved = {case.title: _approved(case) for case in cases}
    assert len(approved) == len(cases), "case titles are unique"
    assert DEMO_THREAD_CASE in DEMO_SOURCE.read_text(encoding="utf-8")
    start, end = (parse_aware_datetime(t, field="valid") for t in DEMO_THREAD_VALIDITY)
    approved[DEMO_THREAD_CASE] = Approved(dict(DEMO_SCOPE), start, end, DEMO_THREAD_CASE)
    return approved


def _queries() -> list[dict[str, Any]]:
    data = _read(PARAPHRASE / "queries.json")
    assert data["format"] == "paraphrase-queries/1"
    return list(data["queries"])


def _gate(doc: DocumentImport) -> DocumentGateFields:
    c = doc.content
    return DocumentGateFields(
        tenant=c.tenant,
        brand=c.brand,
        stores=frozenset(c.stores),
        campaign=c.campaign,
        approved=doc.approved,
        revoked=doc.revoked,
        valid_from=c.valid_from,
        valid_to=c.valid_to,
        published_at=c.published_at,
    )


def _scope(scope: dict[str, str], occurred_at: datetime, known_at: datetime) -> Scope:
    return Scope(
        tenant=scope["tenant"],
        brand=scope["brand"],
        store=scope["store"],
        campaign=scope["campaign"],
        occurred_at=occurred_at,
        known_at=known_at,
    )


def _times(item: dict[str, Any]) -> tuple[datetime, datetime]:
    occurred = parse_aware_datetime(item["occurred_at"], field="occurred_at")
    known = parse_aware_datetime(item["known_at"], field="known_at")
    assert occurred <= known
    return occurred, known


def _admitted_keys(scope: Scope) -> set[str]:
    return {doc.content.doc_key for doc in _documents() if admits(_gate(doc), scope)}


KNOWLEDGE = [q for q in _queries() if q["target"] == "knowledge"]
EXPERIENCE = [q for q in _queries() if q["target"] == "experience"]


def test_the_set_is_large_enough_and_its_ids_unique() -> None:
    queries = _queries()
    assert len(queries) >= MIN_QUERIES
    assert len(KNOWLEDGE) >= MIN_KNOWLEDGE and len(EXPERIENCE) >= MIN_EXPERIENCE
    assert len(KNOWLEDGE) + len(EXPERIENCE) == len(queries)
    assert len({q["id"] for q in queries}) == len(queries)
    assert len({q["text"] for q in queries}) == len(queries)
    assert {q["style"] for q in queries} == STYLES


def test_the_synthetic_items_are_distinct_and_complete() -> None:
    docs = [parse_document(item) for item in _read(PARAPHRASE / "knowledge.json")]
    keys = [d.content.doc_key for d in docs]
    assert len(set(keys)) == len(keys)
    demo_keys = {d.content.doc_key for d in _documents()} - set(keys)
    assert not demo_keys & set(keys)
    assert all(d.content.requirements and d.approved and not d.revoked for d in docs)
    cases = _paraphrase_cases()
    assert max(Counter(c.incident for c in cases).values()) == 1
    assert len(_approved_cases()) == len(cases) + 3
    for case in cases:
        assert case.observations and case.diagnosis.evidence and case.outcome.evidence
        assert case.counterevidence and all(entry.evidence for entry in case.counterevidence)


@pytest.mark.parametrize("query", KNOWLEDGE, ids=lambda q: q["id"])
def test_knowledge_answers_pass_the_gate_of_their_query(query: dict[str, Any]) -> None:
    occurred, known = _times(query)
    admitted = _admitted_keys(_scope(query["scope"], occurred, known))
    assert query["answers"] and set(query["answers"]) <= admitted, sorted(
        set(query["answers"]) - admitted
    )
    assert len(admitted) >= DOZENS


@pytest.mark.parametrize("query", KNOWLEDGE, ids=lambda q: q["id"])
def test_no_knowledge_query_copies_its_answer(query: dict[str, Any]) -> None:
    texts = {d.content.doc_key: d.content.title + d.content.text for d in _documents()}
    assert not [key for key in query["answers"] if query["text"] in texts[key]]


@pytest.mark.parametrize("query", EXPERIENCE, ids=lambda q: q["id"])
def test_experience_answers_are_approved_cases_of_their_scope(query: dict[str, Any]) -> None:
    occurred, _ = _times(query)
    cases = _approved_cases()
    assert query["answers"]
    for title in query["answers"]:
        assert title in cases, title
        assert cases[title].admitted(query["scope"], occurred), title
        assert query["text"] not in cases[title].text
    assert sum(case.admitted(query["scope"], occurred) for case in cases.values()) >= DOZENS


def test_the_held_out_tickets_are_labelled_and_their_answers_admitted() -> None:
    labels = _read(PARAPHRASE / "heldout-labels.json")
    assert labels["format"] == "heldout-labels/1"
    tickets = {t["id"]: t for t in _read(FIXTURES / "heldout" / "tickets.json")["tickets"]}
    by_id = {entry["id"]: entry for entry in labels["labels"]}
    assert set(by_id) == set(tickets)
    cases = _approved_cases()
    for ticket_id, entry in by_id.items():
        ticket = tickets[ticket_id]
        occurred, known = _times(ticket["context"])
        admitted = _admitted_keys(_scope(ticket["scope"], occurred, known))
        assert set(entry["knowledge"]) <= admitted, (ticket_id, entry["knowledge"])
        for title in entry["experience"]:
            assert cases[title].admitted(ticket["scope"], occurred), (ticket_id, title)
    assert sum(bool(entry["knowledge"]) for entry in by_id.values()) >= len(tickets) - 1
