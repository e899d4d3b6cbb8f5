"""Word-level differences between two texts, for people to read: pure, no Django.

A text is cut into tokens that, joined, give the text back exactly: an ASCII letter/digit run is
one word, each Han character is one token (Chinese has no spaces between words, and the
characters of ``textsearch.domain`` are the ones it tokenises), a run of white space is one
token, and any other character stands alone. The two token lists are aligned (``difflib``'s
longest matching blocks) and adjacent tokens of one kind are joined into a segment:

- ``SAME``: in both texts;
- ``DELETED``: only in the old text;
- ``INSERTED``: only in the new text.

So the ``SAME`` and ``INSERTED`` segments, in order, rebuild the new text, and the ``SAME`` and
``DELETED`` ones rebuild the old (``tests/textsearch/test_worddiff.py`` holds this as a
property). A deletion always comes before the insertion that replaces it.

``field_diffs`` compares two records field by field (title, scope, statements, text), each field
a labelled text, for the console's version and case comparisons.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from textsearch.domain import CJK_CHARACTERS

SAME = "same"
DELETED = "del"
INSERTED = "ins"

_TOKEN = re.compile(rf"[A-Za-z0-9]+|[{CJK_CHARACTERS}]|\s+|.", re.DOTALL)

# Aligning n tokens with m costs up to n*m steps: beyond this many, whole lines are aligned
# instead of tokens (the segments still rebuild both texts).
MAX_TOKEN_PAIRS = 4_000_000


def tokens(text: str) -> list[str]:
    """``text`` cut into words, single Han characters, white-space runs and other characters;
    ``"".join(tokens(text)) == text``."""
    return _TOKEN.findall(text)


@dataclass(frozen=True)
class Segment:
    kind: str  # SAME, DELETED or INSERTED
    text: str


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def word_diff(old: str, new: str) -> tuple[Segment, ...]:
    """The segments that turn ``old`` into ``new``, word by word (character by character in
    Chinese)."""
    a, b = tokens(old), tokens(new)
    if len(a) * len(b) > MAX_TOKEN_PAIRS:
        a, b = _lines(old), _lines(new)
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    out: list[Segment] = []

    def add(kind: str, parts: Sequence[str]) -> None:
        text = "".join(parts)
        if not text:
            return
        if out and out[-1].kind == kind:
            out[-1] = Segment(kind, out[-1].text + text)
        else:
            out.append(Segment(kind, text))

    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            add(SAME, a[i1:i2])
        else:
            add(DELETED, a[i1:i2])
            add(INSERTED, b[j1:j2])
    return tuple(out)


def old_side(segments: Sequence[Segment]) -> tuple[Segment, ...]:
    """What the old text shows: its kept and deleted segments."""
    return tuple(s for s in segments if s.kind != INSERTED)


def new_side(segments: Sequence[Segment]) -> tuple[Segment, ...]:
    """What the new text shows: its kept and inserted segments."""
    return tuple(s for s in segments if s.kind != DELETED)


def rebuilt(segments: Sequence[Segment]) -> str:
    return "".join(s.text for s in segments)


def changed(segments: Sequence[Segment]) -> bool:
    return any(s.kind != SAME for s in segments)


@dataclass(frozen=True)
class FieldDiff:
    """One field of two records: its name, its label, and its text's segments."""

    name: str
    label: str
    segments: tuple[Segment, ...]

    @property
    def changed(self) -> bool:
        return changed(self.segments)

    @property
    def old(self) -> tuple[Segment, ...]:
        return old_side(self.segments)

    @property
    def new(self) -> tuple[Segment, ...]:
        return new_side(self.segments)


Fields = Sequence[tuple[str, str, str]]  # (name, label, text)


def field_diffs(old: Fields, new: Fields) -> list[FieldDiff]:
    """Each field of ``new`` beside the same-named field of ``old``, in ``new``'s order, then
    the fields only ``old`` has (a field one record lacks compares with the empty text)."""
    old_by_name = {name: text for name, _label, text in old}
    new_names = {name for name, _label, _text in new}
    rows = [
        FieldDiff(name, label, word_diff(old_by_name.get(name, ""), text))
        for name, label, text in new
    ]
    rows += [
        FieldDiff(name, label, word_diff(text, ""))
        for name, label, text in old
        if name not in new_names
    ]
    return rows


# Below this share of tokens in common (``SequenceMatcher.ratio``), two statements are not
# compared word by word: marking nearly every word would say less than "only in this case".
CLOSE_ENOUGH = 0.3


def closest(text: str, others: Sequence[str]) -> int | None:
    """The index of the text of ``others`` most like ``text`` (the first of equals), or None when
    none shares at least ``CLOSE_ENOUGH`` of their tokens."""
    mine = tokens(text)
    best, best_ratio = None, CLOSE_ENOUGH
    for index, other in enumerate(others):
        ratio = SequenceMatcher(None, mine, tokens(other), autojunk=False).ratio()
        if ratio >= best_ratio and (best is None or ratio > best_ratio):
            best, best_ratio = index, ratio
    return best
