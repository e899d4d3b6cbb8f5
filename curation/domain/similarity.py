"""Similar cases, over plain values: shingles, MinHash and LSH bands, and two cases side by side.

- **Similarity** is the Jaccard similarity of the shingle sets of title, summary, observation
  excerpts and diagnosis statement (the tokens of knowledge search: ASCII words and adjacent
  CJK pairs). MinHash signatures cut into LSH bands (shape chosen by ``datasketch`` for the
  threshold) find candidate pairs without comparing every case with every other; each candidate
  is then measured exactly.
- **Two cases side by side** (``compare_cases``): each section's statements, each marked by how
  it stands against the other case's statements of that section (the same, similar, only here).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from curation.domain.proposals import normalize_hypothesis
from knowledge.domain import jaccard, tokenize

# --- similarity: shingles, MinHash, LSH --------------------------------------------------------

NUM_PERM = 128
MINHASH_SEED = 1
DEFAULT_SIMILARITY_THRESHOLD = 0.4
# LSH only proposes candidate pairs, each then measured exactly; missing a pair costs more than
# measuring one too many, so the band shape is chosen with false negatives weighted up.
LSH_WEIGHTS = (0.1, 0.9)


def similarity_text(
    title: str, summary: str, observations: Iterable[str], diagnosis_statement: str
) -> str:
    return "\n".join(p for p in (title, summary, *observations, diagnosis_statement) if p)


def shingles(text: str) -> frozenset[str]:
    return tokenize(text)


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two shingle sets."""
    return float(jaccard(a, b))


def signature(shingle_set: Iterable[str]) -> tuple[int, ...]:
    """The MinHash signature (``NUM_PERM`` values); the same shingles give the same values."""
    # Imported here: datasketch loads scipy, about a second that every command and test process
    # would otherwise pay at startup although most never compare cases.
    from datasketch import MinHash

    minhash = MinHash(num_perm=NUM_PERM, seed=MINHASH_SEED)
    minhash.update_batch([s.encode("utf-8") for s in sorted(shingle_set)])
    return tuple(int(v) for v in minhash.hashvalues)


@functools.lru_cache(maxsize=16)
def lsh_shape(threshold: float) -> tuple[int, int]:
    """(bands, rows per band) that ``datasketch`` picks for this threshold and ``NUM_PERM``;
    cached, since datasketch integrates numerically to choose them (~40 ms a call)."""
    from datasketch import MinHashLSH  # see signature() for why here

    index = MinHashLSH(threshold=threshold, num_perm=NUM_PERM, weights=LSH_WEIGHTS)
    return int(index.b), int(index.r)


def band_keys(values: Sequence[int], *, bands: int, rows: int) -> list[str]:
    """One key per band; two signatures sharing any band key are a candidate pair."""
    keys = []
    for band in range(bands):
        chunk = ",".join(str(v) for v in values[band * rows : (band + 1) * rows])
        keys.append(
            hashlib.sha1(f"{band}:{chunk}".encode(), usedforsecurity=False).hexdigest()[:20]
        )
    return keys


# --- two cases side by side ----------------------------------------------------------------------

COMPARED_SECTIONS = ("observations", "diagnosis", "counterevidence", "outcome")


# How a statement of one case stands against the other case's statements of the same section.
SAME = "same"  # the other case says it too (as ``normalize_hypothesis`` folds text)
SIMILAR = "similar"  # the other says something close (token Jaccard >= COMPARE_SIMILAR)
ONLY_HERE = "only_here"  # the other case says nothing like it
COMPARE_SIMILAR = Fraction(1, 2)


@dataclass(frozen=True)
class ComparedEntry:
    """One statement of a case's section, with what backs it, and how it stands against the
    other case of the comparison (``SAME``, ``SIMILAR`` or ``ONLY_HERE``)."""

    text: str
    detail: str
    evidence: tuple[str, ...]
    match: str

    @property
    def only_here(self) -> bool:
        return self.match == ONLY_HERE


@dataclass(frozen=True)
class ComparedRow:
    section: str
    left: tuple[ComparedEntry, ...]
    right: tuple[ComparedEntry, ...]

    @property
    def differs(self) -> bool:
        return any(entry.match != SAME for entry in (*self.left, *self.right))


def _excerpts(items: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(str(item.get("excerpt") or "") for item in items if item.get("excerpt"))


def section_statements(
    content: Mapping[str, Any], section: str
) -> list[tuple[str, str, tuple[str, ...]]]:
    """A case's section as (statement, detail, evidence excerpts): an observation is its
    excerpt and its source; a ruled-out hypothesis is "hypothesis: statement", its detail what
    it refutes."""
    if section == "observations":
        return [
            (str(item.get("excerpt") or ""), str(item.get("source_id") or ""), ())
            for item in content.get("observations") or []
        ]
    if section == "counterevidence":
        return [
            (
                f"{entry.get('hypothesis', '')}: {entry.get('statement', '')}",
                str(entry.get("refutes") or ""),
                _excerpts(entry.get("evidence") or []),
            )
            for entry in content.get("counterevidence") or []
        ]
    part = content.get(section) or {}
    statement = str(part.get("statement") or "")
    return [(statement, "", _excerpts(part.get("evidence") or []))] if statement else []


def statement_match(text: str, others: Sequence[str]) -> str:
    """``SAME`` when one of ``others`` says ``text``, ``SIMILAR`` when one is close to it,
    else ``ONLY_HERE``."""
    key = normalize_hypothesis(text)
    if any(normalize_hypothesis(other) == key for other in others):
        return SAME
    tokens = tokenize(text)
    if any(jaccard(tokens, tokenize(other)) >= COMPARE_SIMILAR for other in others):
        return SIMILAR
    return ONLY_HERE


def compare_cases(left: Mapping[str, Any], right: Mapping[str, Any]) -> list[ComparedRow]:
    """The four sections of two cases as aligned rows, each statement marked by how it stands
    against the other case's statements of that section."""
    rows = []
    for section in COMPARED_SECTIONS:
        mine, theirs = section_statements(left, section), section_statements(right, section)
        mine_texts, their_texts = [m[0] for m in mine], [t[0] for t in theirs]
        rows.append(
            ComparedRow(
                section,
                tuple(
                    ComparedEntry(text, detail, evidence, statement_match(text, their_texts))
                    for text, detail, evidence in mine
                ),
                tuple(
                    ComparedEntry(text, detail, evidence, statement_match(text, mine_texts))
                    for text, detail, evidence in theirs
                ),
            )
        )
    return rows
