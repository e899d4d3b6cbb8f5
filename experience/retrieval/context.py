"""The context block: reviewed experience an agent may put in its prompt, cut to a token budget.

Pure (no Django imports); the service (``experience.retrieval.block.experience_context``) reads the candidates and
records the reads. "Inject with restraint": only items that pass the gate (approved, in force at
``now``, approved by ``now``, of exactly the caller's scope), that are available (a skill whose
cited cases are gone, a lesson with no usable support, is not) and whose confidence is at least
the threshold; best first; and never more tokens than the caller's budget.

Tokens are counted by :func:`count_tokens`, the offline counter named :data:`TOKENIZER`
(``cjk-char+word4-v1``): every CJK ideograph, kana, Hangul syllable or full-width mark is one
token; every other run of letters and digits is one token per started four characters; every other
visible character (punctuation, symbols) is one token; whitespace is free. It needs no model file
and no network, and it over-counts rather than under-counts against common BPE tokenizers for the
text this product holds (short words, ids, Chinese), so a block within its budget here fits a
model's budget of the same size. It is additive over lines: the count of lines joined by newlines
is the sum of their counts.

Block layout, one line per item after a fixed header::

    [1] case case:<sha256> confidence=0.667 relevance=0.93 found=raw+vector similarity=0.912 历史案例，仅作排查线索 <title>: <text>
    [2] lesson lesson:<sha256> confidence=0.700 relevance=0.41 found=vector similarity=0.871 CONFLICT <title>: <text>

``relevance`` is the calibrated probability that the item answers the query, ``found`` the
branches that found it (``vector`` alone: by meaning only, no word of the query in it), and
``similarity`` its cosine to the query where the vector branch scored it.

Cases and skills carry the historical-case prefix (a lead for investigation only); an item in an
unresolved conflict carries ``CONFLICT``. Items are taken best first until the next one no longer
fits; its text (never its id, type, confidence or markers) is shortened to fit first, so a long
top item is cut rather than skipped, and no lower item ever stands in for a higher one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from experience.core.availability import GateFields
from experience.core.domain import admits
from knowledge.domain import HISTORICAL_CASE_PREFIX

TOKENIZER = "cjk-char+word4-v1"
HEADER = (
    "Reviewed experience for this scope, best first. Each item is a lead for the investigation, "
    "never a confirmed cause; check it against the current evidence."
)
CONFLICT_MARK = "CONFLICT"
LEAD_TYPES = frozenset({"case", "skill"})
ELLIPSIS = "…"
MAX_BUDGET = 32_000
MIN_BUDGET = 1

_CJK = (
    "\u3000-\u303f"  # CJK symbols and punctuation
    "\u3040-\u30ff"  # kana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uff00-\uffef"  # full-width forms
)
_WORD = rf"[^\W_{_CJK}]"  # a character of a word
_TOKEN = re.compile(rf"{_WORD}+|[^\s]")
# The same matches, words told apart from single other characters.
_MATCHES = re.compile(rf"(?P<word>{_WORD}+)|[^\s]")


@lru_cache(maxsize=2048)
def count_tokens(text: str) -> int:
    """Tokens of ``text`` under :data:`TOKENIZER` (see the module docstring). Cached: the same
    items' texts and heads are counted for block after block."""
    # One per match (a word, or any other visible character), plus one per further started four
    # characters of each long word. One scan: a match longer than four characters is a word.
    matches = _TOKEN.findall(text)
    return len(matches) + sum((len(w) - 1) // 4 for w in matches if len(w) > 4)


def smallest_block() -> int:
    """The fewest tokens a block holding one item takes: the header and an item's first line
    with nothing of its text (the shortest an item's line can be)."""
    head = f"[1] case case:{'0' * 64} confidence=0.000 relevance=0.00 found=raw"
    return count_tokens(HEADER) + count_tokens(head)


@dataclass(frozen=True)
class Candidate:
    """One approved item of the scope as the service read it, with what the gate looks at."""

    id: str
    type: str
    title: str
    text: str
    gate: GateFields
    available: bool
    confidence: float | None
    conflict: bool = False
    # What the ranking says of its relevance (``pipeline.Hit``): ``relevance`` and, where the
    # vector branch scored it, ``similarity``; and the branches that found it.
    relevance: Mapping[str, float] | None = None
    found_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Block:
    text: str
    items: tuple[Candidate, ...]
    tokens: int
    budget: int

    def as_json(self) -> dict[str, Any]:
        return {
            "block": self.text,
            "items": [
                {"id": item.id, "type": item.type, "confidence": item.confidence}
                for item in self.items
            ],
            "tokens": self.tokens,
            "budget": self.budget,
            "tokenizer": TOKENIZER,
        }


def eligible(
    candidate: Candidate, scope: Mapping[str, str], now: datetime, threshold: float
) -> bool:
    return (
        admits(candidate.gate, scope, now)
        and candidate.available
        and candidate.confidence is not None
        and candidate.confidence >= threshold
    )


def _flat(text: str) -> str:
    return " ".join(text.split())


def item_head(position: int, candidate: Candidate) -> str:
    """What a line always keeps: position, type, id, confidence and the markers."""
    parts = [
        f"[{position}]",
        candidate.type,
        candidate.id,
        f"confidence={candidate.confidence:.3f}",
    ]
    relevance = candidate.relevance or {}
    if "relevance" in relevance:
        parts.append(f"relevance={relevance['relevance']:.2f}")
    if candidate.found_by:
        parts.append("found=" + "+".join(candidate.found_by))
    if "similarity" in relevance:
        parts.append(f"similarity={relevance['similarity']:.3f}")
    if candidate.conflict:
        parts.append(CONFLICT_MARK)
    if candidate.type in LEAD_TYPES:
        parts.append(HISTORICAL_CASE_PREFIX)
    return " ".join(parts)


def _fitted_line(head: str, body: str, room: int) -> tuple[str, int, bool] | None:
    """``(line, its tokens, whether the body was cut)``: the line with as much of ``body`` as
    fits in ``room`` tokens; None when the head does not fit. Counts are additive over the space
    that joins head and body, so each part is counted once (and the head only once)."""
    head_tokens = count_tokens(head)
    if head_tokens > room:
        return None
    if not body:
        return head, head_tokens, False
    body_tokens = count_tokens(body)
    if head_tokens + body_tokens <= room:
        return f"{head} {body}", head_tokens + body_tokens, False
    low = longest_prefix(body, room - head_tokens - count_tokens(ELLIPSIS))
    if not low:
        return head, head_tokens, True
    cut = body[:low].rstrip() + ELLIPSIS
    return f"{head} {cut}", head_tokens + count_tokens(cut), True


def longest_prefix(text: str, room: int) -> int:
    """The length of the longest prefix of ``text`` that counts at most ``room`` tokens (0 when
    none does).

    Counts grow with the prefix: a prefix holds the tokens of the matches it holds whole, and
    one per started four characters of a word it cuts; whitespace between matches is free."""
    if room < 0:
        return 0
    used = 0
    for match in _MATCHES.finditer(text):
        start, end = match.span()
        word = match.lastgroup == "word"
        cost = (end - start + 3) // 4 if word else 1
        if used + cost > room:
            # A word is cut after as many started four characters as are left; anything else
            # is left out whole.
            return start + 4 * (room - used) if word else start
        used += cost
    return len(text)


def build_block(
    candidates: Iterable[Candidate],
    *,
    scope: Mapping[str, str],
    now: datetime,
    budget: int,
    threshold: float,
) -> Block:
    """The block of the eligible ``candidates`` (given best first) within ``budget`` tokens.

    Candidates are taken in order and no further than the block needs: a lazy iterable is
    read only as far as the budget reaches."""
    lines: list[str] = []
    taken: list[Candidate] = []
    used = 0
    for candidate in candidates:
        if not eligible(candidate, scope, now, threshold):
            continue
        if not lines:
            header = count_tokens(HEADER)
            if header > budget:
                break
            lines.append(HEADER)
            used = header
        head = item_head(len(taken) + 1, candidate)
        body = _flat(f"{candidate.title}: {candidate.text}" if candidate.text else candidate.title)
        fitted = _fitted_line(head, body, budget - used)
        if fitted is None:
            break
        line, tokens, cut = fitted
        lines.append(line)
        taken.append(candidate)
        used += tokens
        if cut:
            break  # the text was cut: the budget is spent
    if not taken:
        return Block(text="", items=(), tokens=0, budget=budget)
    # Counts are additive over lines: the block's is the sum of its lines'.
    return Block(text="\n".join(lines), items=tuple(taken), tokens=used, budget=budget)
