"""The context block: reviewed experience an agent may put in its prompt, cut to a token budget.

Pure (no Django imports); the service (``experience.context_service``) reads the candidates and
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

    [1] case case:<sha256> confidence=0.667 历史案例，仅作排查线索 <title>: <text>
    [2] lesson lesson:<sha256> confidence=0.700 CONFLICT <title>: <text>

Cases and skills carry the historical-case prefix (a lead for investigation only); an item in an
unresolved conflict carries ``CONFLICT``. Items are taken best first until the next one no longer
fits; its text (never its id, type, confidence or markers) is shortened to fit first, so a long
top item is cut rather than skipped, and no lower item ever stands in for a higher one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
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
_TOKEN = re.compile(rf"(?P<word>[^\W_{_CJK}]+)|[^\s]")


def count_tokens(text: str) -> int:
    """Tokens of ``text`` under :data:`TOKENIZER` (see the module docstring)."""
    total = 0
    for match in _TOKEN.finditer(text):
        word = match.group("word")
        total += math.ceil(len(word) / 4) if word else 1
    return total


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
    if candidate.conflict:
        parts.append(CONFLICT_MARK)
    if candidate.type in LEAD_TYPES:
        parts.append(HISTORICAL_CASE_PREFIX)
    return " ".join(parts)


def _line(head: str, body: str) -> str:
    return f"{head} {body}" if body else head


def _fitted_line(head: str, body: str, room: int) -> str | None:
    """The line with as much of ``body`` as fits in ``room`` tokens; None when the head does not."""
    if count_tokens(head) > room:
        return None
    full = _line(head, body)
    if count_tokens(full) <= room:
        return full
    low, high = 0, len(body)  # the longest prefix that fits, by bisection (counts are monotone)
    while low < high:
        middle = (low + high + 1) // 2
        if count_tokens(_line(head, body[:middle].rstrip() + ELLIPSIS)) <= room:
            low = middle
        else:
            high = middle - 1
    return _line(head, body[:low].rstrip() + ELLIPSIS) if low else head


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
        line = _fitted_line(head, body, budget - used)
        if line is None:
            break
        lines.append(line)
        taken.append(candidate)
        used += count_tokens(line)
        if line != _line(head, body):
            break  # the text was cut: the budget is spent
    if not taken:
        return Block(text="", items=(), tokens=0, budget=budget)
    text = "\n".join(lines)
    return Block(text=text, items=tuple(taken), tokens=count_tokens(text), budget=budget)
