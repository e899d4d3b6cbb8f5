"""The shipped retrieval evaluation set (``fixtures/eval/``) is what the README says it is: at
least 40 paraphrase queries over every language pair (8 or more across languages each way) and
10 nothing-queries, the knowledge base's no-match example among them in both languages; half
its items English, half Chinese; every expected id an item the set or the demo imports."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluation.retrieval_scores import EXPERIENCE, KNOWLEDGE, queries_parsed
from experience.cases.schema import parse_case

FIXTURES = Path(settings.BASE_DIR) / "fixtures"
EVAL = FIXTURES / "eval"
NO_MATCH_EXAMPLE = "打印机断电了"
# What the command's flags give by default: the demo tenant and brand, the clock.
FLAGS = {
    "tenant": settings.DEMO_TENANT,
    "brand": settings.DEMO_BRAND,
    "now": datetime.fromisoformat("2026-12-01T12:00:00+08:00"),
}


def _read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _chinese(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_the_set_has_the_queries_the_readme_reports() -> None:
    queries = queries_parsed((EVAL / "queries.jsonl").read_text(encoding="utf-8"), FLAGS)

    paraphrases = [q for q in queries if not q.nothing]
    nothing = [q for q in queries if q.nothing]
    pairs = Counter(q.pair for q in paraphrases)
    assert len(paraphrases) >= 40 and len(nothing) >= 10
    assert set(pairs) == {"en→en", "en→zh", "zh→en", "zh→zh"}
    assert pairs["en→zh"] >= 8 and pairs["zh→en"] >= 8
    assert {q.language for q in nothing} == {"en", "zh"}
    example = [q for q in nothing if q.text == NO_MATCH_EXAMPLE and q.kind == KNOWLEDGE]
    assert [(q.scope["campaign"], q.scope["store"]) for q in example] == [
        ("campaign-a", "store-001")
    ]
    # Its paraphrases, in both languages.
    printer = [q for q in nothing if "printer" in q.id]
    assert {q.language for q in printer} == {"en", "zh"} and len(printer) >= 3
    for query in queries:
        assert _chinese(query.text) == (query.language == "zh"), query.id


def test_every_expected_id_is_an_item_of_the_set_or_the_demo_in_its_language() -> None:
    documents = _read(EVAL / "knowledge.json")
    demo = _read(FIXTURES / "knowledge.json")
    cases = [parse_case(item) for item in _read(EVAL / "cases.json")]
    languages = {f"doc:{d['doc_key']}": "zh" if _chinese(d["text"]) else "en" for d in demo}
    languages |= {f"doc:{d['doc_key']}": "zh" if _chinese(d["text"]) else "en" for d in documents}
    languages |= {case.id: "zh" if _chinese(case.title) else "en" for case in cases}

    queries = queries_parsed((EVAL / "queries.jsonl").read_text(encoding="utf-8"), FLAGS)

    for query in queries:
        for expected in query.expected:
            assert languages[expected] == query.answer_language, (query.id, expected)
    # Half the set's items English, half Chinese.
    assert Counter(_chinese(d["text"]) for d in documents) == {True: 8, False: 8}
    assert Counter(_chinese(case.title) for case in cases) == {True: 4, False: 4}
    # Every expected case is one the set imports, of the scope its query asks.
    for query in (q for q in queries if q.kind == EXPERIENCE):
        for expected in query.expected:
            (case,) = [c for c in cases if c.id == expected]
            assert dict(case.scope) == dict(query.scope)
