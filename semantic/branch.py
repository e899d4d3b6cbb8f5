"""The vector branch of a search: exact cosine over the gated entries of one scope.

It runs after the gate, over exactly the entries the caller says passed it, so it can never
widen what a search may return. The scope's packed matrix is read once per process and kept
until the scope is packed again (its ``version``); the query's vector comes from ``semantic.queries``.
Every gated entry with a vector gets its cosine to the query (``similarity``) and its
**significance**: how far that cosine stands above the query's cosines to ordinary texts of the
entry's language (``semantic.calibration``). The branch ranks only the entries whose
significance exceeds the model's calibrated floor, most significant first, at most
``SEMANTIC_DEPTH`` of them, ties by the caller's tie order (the item ids' order): an item found
by meaning alone is one that meaning says more likely answers than not, whatever the language
of the question and of the item. A question nothing answers ranks nothing. The caller fuses the
ranks with its lexical branches by RRF, counting them ``SEMANTIC_VOTES`` times (``votes()``),
and reports each returned item's similarity and relevance (``Calibration.relevance``).

What the branch did is its ``status``, which every answer carries as ``semantic``:

- ``used``: every gated entry had a vector;
- ``partial``: some gated entries are not embedded yet (``unembedded``): they were ranked by
  their words only;
- ``not_indexed``: no gated entry of the scope has a vector of the configured model yet;
- ``unavailable``: the embedder failed or did not answer within ``SEMANTIC_QUERY_TIMEOUT``;
- ``off``: no embedder is configured (``SEMANTIC_EMBEDDER=off``).

In all but ``used`` and ``partial`` the answer is the lexical one, never an error.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection

from semantic import calibration, embedders, queries, scoring
from semantic.models import PackedMatrix
from semantic.packing import Stored

logger = logging.getLogger(__name__)

USED = "used"
PARTIAL = "partial"
NOT_INDEXED = "not_indexed"
UNAVAILABLE = "unavailable"
OFF = "off"

DEFAULT_DEPTH = 20
DEFAULT_VOTES = 2
MAX_VOTES = 3


@dataclass(frozen=True)
class Packed:
    version: int
    model: str
    keys: np.ndarray
    matrix: np.ndarray
    # The language code of each key's text, and the item end of its significance (four
    # figures a key); None when packed before they were kept.
    languages: np.ndarray | None = None
    item_null: np.ndarray | None = None
    # The last delta row applied (``VectorDelta.seq``; 0: none since the merge).
    seq: int = 0

    @cached_property
    def quantised(self) -> scoring.Quantised:
        """The matrix's int8 copy, made once per packing per process (about 10 ms at 10k)."""
        return scoring.quantised(self.matrix)

    @property
    def nbytes(self) -> int:
        extra = sum(a.nbytes for a in (self.languages, self.item_null) if a is not None)
        # The int8 copy and its row figures: a quarter of the float matrix and 32 bytes a row.
        copy = self.matrix.size + 32 * len(self.keys)
        return int(self.keys.nbytes + self.matrix.nbytes + extra + copy)

    def rows(self, entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where each of ``entries`` (entry ids) is in the matrix, and whether it is there at
        all (an entry not embedded yet is not). The scope's entries are the same from search to
        search until its index changes: the answer for the last ones asked is kept (comparing
        two id arrays is a small fraction of searching one in the other)."""
        kept = self.__dict__.get("_rows_of")
        if kept is not None and np.array_equal(kept[0], entries):
            return kept[1], kept[2]
        at, hit = self._rows(entries)
        self.__dict__["_rows_of"] = (np.array(entries, copy=True), at, hit)
        return at, hit

    def _rows(self, entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        wanted = entries.astype(np.int64)
        at = np.searchsorted(self.keys, wanted)
        inside = at < len(self.keys)
        hit = np.zeros(len(wanted), dtype=bool)
        hit[inside] = self.keys[at[inside]] == wanted[inside]
        return at, hit


class Scores:
    """The exact cosine and significance of each gated, embedded entry, on demand: the ranking
    computed those of its head (``kept``); any other entry an answer reports (one a lexical
    branch found) is scored from the float matrix when asked, one row. Without the model's
    reference the significance is NaN."""

    def __init__(
        self,
        matrix: np.ndarray,
        vector: np.ndarray,
        positions: np.ndarray,
        rows: np.ndarray,
        significance: scoring.Significance | None,
    ) -> None:
        self._matrix = matrix
        self._vector = vector
        self._positions = positions
        self._rows = rows
        self._significance = significance
        self._known: dict[int, tuple[float, float]] = {}

    def kept(self, head: scoring.Head) -> None:
        for at, sim, z in zip(head.scored, head.sims, head.z, strict=True):
            self._known[int(at)] = (float(sim), float(z))

    def at(self, index: int) -> tuple[float, float] | None:
        """``(cosine, significance)`` of the entry at ``index`` (of the entries given), None
        where it was not scored (not gated, or not embedded)."""
        found = np.searchsorted(self._positions, index)  # the positions are sorted (gated order)
        if found >= len(self._positions) or self._positions[found] != index:
            return None
        at = int(found)
        known = self._known.get(at)
        if known is None:
            sims = scoring.exact(self._matrix, self._rows[at : at + 1], self._vector)
            z = (
                float(self._significance(sims, np.array([at]))[0])
                if self._significance is not None
                else float("nan")
            )
            known = self._known[at] = (float(sims[0]), z)
        return known


@dataclass(frozen=True)
class Branch:
    """``ranks``: per entry given, its rank in the vector branch (from 1), 0 when not ranked;
    ``scores``: each entry's cosine to the query and how significant that is (``scored``);
    ``calibration``: the curves of the model that scored them."""

    status: str
    ranks: np.ndarray | None = None
    unembedded: int = 0
    scores: Scores | None = None
    calibration: calibration.Calibration | None = None

    def scored(self, index: int) -> tuple[float | None, float | None]:
        """``(similarity, significance)`` of the entry at ``index``, None where not scored."""
        found = None if self.scores is None else self.scores.at(index)
        if found is None:
            return None, None
        return found

    def relevance(self, index: int, share: float | None) -> float:
        """The item's calibrated relevance from its significance (where scored) and the share
        of the query's words it holds (where a lexical branch found it)."""
        chosen = self.calibration or calibration.lexical_only()
        return chosen.relevance(self.scored(index)[1], share)

    def described(self, index: int, share: float | None) -> dict[str, float]:
        """What an answer item says of its relevance: ``relevance``, and ``similarity`` where
        the vector branch scored it."""
        similarity, _ = self.scored(index)
        answer = {"relevance": self.relevance(index, share)}
        if similarity is not None:
            answer["similarity"] = round(similarity, 3)
        return answer

    @property
    def ranked(self) -> bool:
        return self.ranks is not None and bool((self.ranks > 0).any())


# --- the scope's matrix, per process --------------------------------------------------------

# One small statement per search: the scope's version and, in the same snapshot, the delta's
# rows after those this process holds for that version (all after the last merge when it holds
# another version or none). The matrix itself travels only when the version changed.
_VERSION_SQL = """
SELECT pm.version, pm.model, pm.dim, d.seq, d.entry, d.vector, d.language, d.item_null
FROM semantic_packedmatrix pm
LEFT JOIN semantic_vectordelta d
  ON d.space = pm.space AND d.scope = pm.scope AND d.model = pm.model
 AND d.seq > CASE WHEN pm.version = %s THEN %s ELSE pm.merged_seq END
WHERE pm.space = %s AND pm.scope = %s
"""
_packed_cache: OrderedDict[tuple[str, int], Packed] = OrderedDict()
# Per scope kept: the packed matrix as merged (by its version) and the delta's rows on top of it.
_parts: dict[tuple[str, int], tuple[int, Stored, list[tuple[Any, ...]]]] = {}
_packed_lock = threading.Lock()
PACKED_CACHE_BYTES = 256 * 1024 * 1024


class _Fetched(threading.local):
    """What this thread's last :func:`packed` received: bytes of vectors and keys, delta rows."""

    bytes: int = 0
    delta_rows: int = 0


FETCHED = _Fetched()


def _merged(space: str, scope: int, version: int) -> tuple[str, int, Stored] | None:
    """The scope's matrix as merged, when it is still at ``version``."""
    full = (
        PackedMatrix.objects.filter(space=space, scope=scope)
        .values_list("version", "model", "dim", "keys", "matrix", "languages", "item_null")
        .first()
    )
    if full is None or not full[1] or full[0] != version:
        return None
    _, model, dim, keys, matrix, languages, item_null = full
    FETCHED.bytes += sum(len(bytes(b or b"")) for b in (keys, matrix, languages, item_null))
    ids = np.frombuffer(bytes(keys), dtype=np.int64)
    nulls = np.frombuffer(bytes(item_null or b""), dtype=np.float32)
    return (
        model,
        int(dim or 0),
        Stored(
            ids,
            np.frombuffer(bytes(matrix), dtype=np.float32).reshape(len(ids), dim or 0),
            np.frombuffer(bytes(languages or b""), dtype=np.uint8),
            nulls.reshape(len(ids), 4)
            if nulls.size == 4 * len(ids)
            else np.zeros((0, 4), np.float32),
        ),
    )


def packed(space: str, scope: int) -> Packed | None:
    """The scope's packed vectors with its delta applied, or None when it never was packed.
    A process keeps them per scope and fetches, after an addition, only the delta's new rows."""
    key = (space, scope)
    FETCHED.bytes = FETCHED.delta_rows = 0
    for _attempt in range(4):
        with _packed_lock:
            kept = _packed_cache.get(key)
            parts = _parts.get(key)
        held = parts if parts is not None and kept is not None else None
        # One small statement per search (the ORM's own cost was most of the branch's at 100).
        with connection.cursor() as cursor:
            cursor.execute(
                _VERSION_SQL,
                [held[0] if held else -1, kept.seq if held and kept else 0, space, scope],
            )
            rows = cursor.fetchall()
        if not rows or not rows[0][1]:
            return None
        version, model, dim = int(rows[0][0]), rows[0][1], int(rows[0][2] or 0)
        fresh = [
            (int(seq), int(entry), bytes(vector), int(language), bytes(null or b""))
            for _, _, _, seq, entry, vector, language, null in rows
            if seq is not None
        ]
        FETCHED.delta_rows = len(fresh)
        FETCHED.bytes += sum(len(row[2]) + len(row[4]) + 8 for row in fresh)
        if held is not None and held[0] == version and kept is not None and kept.model == model:
            if not fresh:
                with _packed_lock:
                    _packed_cache.move_to_end(key)
                return kept
            base, delta = held[1], [*held[2], *fresh]
        else:
            merged = _merged(space, scope, version)
            if merged is None:
                continue  # merged again between the two statements: read again
            model, dim, base = merged
            delta = fresh
        combined = base.with_rows([row[1:] for row in delta], dim)
        nulls = combined.item_null
        fresh_packed = Packed(
            version,
            model,
            combined.keys,
            combined.matrix,
            combined.languages if len(combined.languages) == len(combined.keys) else None,
            (
                nulls.reshape(len(combined.keys), -1)
                if len(combined.keys) and nulls.size == 4 * len(combined.keys)
                else None
            ),
            seq=max((row[0] for row in delta), default=0),
        )
        fresh_packed.quantised  # noqa: B018 (made here, not in the first search that reads it)
        with _packed_lock:
            _packed_cache[key] = fresh_packed
            _parts[key] = (version, base, delta)
            _packed_cache.move_to_end(key)
            while sum(p.nbytes for p in _packed_cache.values()) > PACKED_CACHE_BYTES:
                dropped, _ = _packed_cache.popitem(last=False)
                _parts.pop(dropped, None)
        return fresh_packed
    return None


def caches_cleared() -> None:
    """Forget the kept matrices and query vectors (tests: ids are reused after a rollback)."""
    with _packed_lock:
        _packed_cache.clear()
        _parts.clear()
    queries.memory_cleared()
    with _query_nulls_lock:
        _query_nulls.clear()
    calibration.references_cleared()


# --- the branch ---------------------------------------------------------------------------------

_query_nulls: OrderedDict[tuple[str, bytes], tuple[np.ndarray, np.ndarray]] = OrderedDict()
_query_nulls_lock = threading.Lock()


def _query_null(
    reference: calibration.Reference, model: str, vector: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``reference.query_null(vector)``, kept per model and vector as the vectors are."""
    key = (model, vector.tobytes())
    with _query_nulls_lock:
        kept = _query_nulls.get(key)
    if kept is None:
        kept = reference.query_null(vector)
        with _query_nulls_lock:
            _query_nulls[key] = kept
            while len(_query_nulls) > queries.MEMORY_SIZE:
                _query_nulls.popitem(last=False)
    return kept


def votes() -> int:
    """How many times the vector branch's ranks count in the RRF sum (``SEMANTIC_VOTES``): with
    one vote, two lexical branches that agree outvote it on every item; the fusion stays one
    exact fraction per item for any count from 1 to ``MAX_VOTES`` (the fraction's denominator is
    a product of one (k + rank) per vote, kept within a 64-bit integer)."""
    return max(1, min(MAX_VOTES, int(getattr(settings, "SEMANTIC_VOTES", DEFAULT_VOTES))))


def vector_branch(
    space: str,
    scope: int | None,
    ids: np.ndarray,
    among: np.ndarray,
    order: np.ndarray,
    query: str,
) -> Branch:
    """Rank the entries ``ids[among]`` of ``scope`` by cosine to ``query``.

    ``ids``: entry ids (the index's primary keys) of the scope's entries; ``among``: which of
    them passed the gate; ``order``: their tie order. The ranks come back aligned with ``ids``.
    """
    if not embedders.enabled():
        return Branch(OFF)
    gated = np.nonzero(among)[0]
    try:
        embedder = embedders.configured()
    except embedders.EmbedderUnavailable as error:
        logger.warning("semantic branch unavailable: %s", error)
        return Branch(UNAVAILABLE, unembedded=len(gated))
    if embedder is None:
        return Branch(OFF)
    found = packed(space, scope) if scope is not None else None
    if found is None or found.model != embedder.name or len(found.keys) == 0:
        return Branch(NOT_INDEXED, unembedded=len(gated))
    every_at, every_hit = found.rows(ids)
    at, hit = every_at[gated], every_hit[gated]
    unembedded = int((~hit).sum())
    if not hit.any():
        return Branch(NOT_INDEXED, unembedded=unembedded)
    try:
        vector = queries.query_vector(embedder, query, f"{space}:{scope}")
    except embedders.EmbedderUnavailable as error:
        logger.warning("semantic branch unavailable: %s", error)
        return Branch(UNAVAILABLE, unembedded=len(gated))
    if vector.shape[0] != found.matrix.shape[1]:
        return Branch(NOT_INDEXED, unembedded=len(gated))
    positions = gated[hit]
    rows = at[hit]
    curves = calibration.for_model(embedder.name)
    reference = calibration.reference(embedder.name, int(found.matrix.shape[1]))
    asked = calibration.language_code(query)
    codes = (
        found.languages[rows]
        if found.languages is not None
        else np.full(len(rows), asked, dtype=np.uint8)
    )
    nulls = None if found.item_null is None else found.item_null[rows]

    # The query's end of every significance, worked out once per question vector.
    query_null = None if reference is None else _query_null(reference, embedder.name, vector)

    def significance(sims: np.ndarray, at_positions: np.ndarray | None) -> np.ndarray:
        assert reference is not None
        if at_positions is None:
            return reference.significance(vector, sims, codes, nulls, asked, query_null)
        return reference.significance(
            vector,
            sims,
            codes[at_positions],
            None if nulls is None else nulls[at_positions],
            asked,
            query_null,
        )

    ranks = np.zeros(len(ids), dtype=np.int64)
    scores = Scores(found.matrix, vector, positions, rows, significance if reference else None)
    if reference is not None:
        depth = int(getattr(settings, "SEMANTIC_DEPTH", DEFAULT_DEPTH))
        head = scoring.ranked_head(
            found.matrix,
            found.quantised,
            rows,
            vector,
            significance,
            curves.floors(asked, codes),
            order[positions],
            depth,
        )
        best = positions[head.chosen]
        ranks[best] = np.arange(1, len(best) + 1)
        scores.kept(head)
    # Without the reference (not embedded yet) nothing is significant: the branch ranks nothing
    # and the similarities are reported as they are.
    return Branch(
        PARTIAL if unembedded else USED,
        ranks,
        unembedded,
        scores=scores,
        calibration=curves,
    )
