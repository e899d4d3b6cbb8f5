"""The vector branch's scoring: cosines from an int8 copy of a scope's matrix, exact where they
decide the ranking.

Pure numpy and simsimd, no Django. A scope's float32 matrix is quantised once per packing (per
row: ``row ≈ scale · int8 row``, ``scale`` the row's largest magnitude over 127), and so is each
query vector. The integer dot products (simsimd's SIMD kernels, exact in integers, one thread) are
an order of magnitude cheaper than the float product over the same rows, and each comes with a
**bound** on how far it can be from the float cosine (``Quantised.bounds``). The ranking needs
the exact values only where the bounds cannot decide it: ``head`` keeps the rows whose best case
reaches the ``depth``-th row's worst case and their floor; those are scored again in float32
(``exact``) and ranked. Every other row is strictly beaten by ``depth`` rows that pass their floor,
or cannot pass its own, so the ranking equals the one over exact cosines of every row.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import simsimd

INT8_LIMIT = 127
# Below this share of a scope's rows admitted by the gate, the admitted int8 rows are gathered
# and scored; above it, scoring the whole contiguous matrix and picking the admitted results is
# cheaper than the gathering copy (0.22 against 0.40 ms at 10k × 384, 80% admitted).
GATHER_BELOW = 0.5
# The float32 product's own rounding (384 terms of magnitude ≤ 1: about 2e-5 at most) is not in
# the quantisation bound; this slack covers it with room to spare.
FLOAT_SLACK = 1e-4


@dataclass(frozen=True)
class Quantised:
    """A matrix's int8 copy: ``rows`` (n, d) int8, ``scale`` (n,) float64 with
    ``matrix ≈ rows · scale``, and per row the norms its error bound needs: ``l1`` of the int8
    row, ``error`` (the L2 norm of ``matrix − rows · scale``) and ``norm`` (of ``rows · scale``)."""

    rows: np.ndarray
    scale: np.ndarray
    l1: np.ndarray
    error: np.ndarray
    norm: np.ndarray

    @property
    def nbytes(self) -> int:
        extra = self.scale.nbytes + self.l1.nbytes + self.error.nbytes + self.norm.nbytes
        return int(self.rows.nbytes + extra)

    def bounds(
        self, query: Quantised, picked: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The approximate cosine of each row (``picked`` rows, or all) to ``query`` (one
        quantised row) and the bound on its distance to the exact float cosine.

        With ``x = s·x̂ + e`` (row) and ``v = t·v̂ + f`` (query), ``x·v − s·t·(x̂·v̂) = e·v + s·x̂·f``:
        each term is bounded both by the per-component error (at most half a step: ``s/2·|v̂|₁·t``,
        ``s·|x̂|₁·t/2``, plus ``s·t·d/4`` for ``e·f``) and by Cauchy–Schwarz (``|e|·|v| + |s·x̂|·|f|``);
        the smaller of the two holds."""
        rows, scale, l1, error, norm = (
            (self.rows, self.scale, self.l1, self.error, self.norm)
            if picked is None
            else (
                self.rows[picked],
                self.scale[picked],
                self.l1[picked],
                self.error[picked],
                self.norm[picked],
            )
        )
        if len(rows) == 0:
            empty = np.zeros(0, dtype=np.float64)
            return empty, empty
        dots = np.asarray(
            simsimd.cdist(rows, query.rows, metric="dot", threads=1), dtype=np.float64
        )[:, 0]
        t = float(query.scale[0])
        approximate = dots * scale * t
        dim = rows.shape[1]
        steps = scale * t * ((l1 + float(query.l1[0])) / 2 + dim / 4)
        # |v| ≤ |t·v̂| + |f|
        schwarz = error * float(query.norm[0] + query.error[0]) + norm * float(query.error[0])
        return approximate, np.minimum(steps, schwarz) + FLOAT_SLACK


def quantised(matrix: np.ndarray) -> Quantised:
    """The int8 copy of ``matrix`` (float32 rows), with each row's scale and error norms."""
    values = np.asarray(matrix, dtype=np.float32)
    if values.ndim == 1:
        values = values.reshape(1, -1)
    peak = np.abs(values).max(axis=1).astype(np.float64) if values.size else np.zeros(len(values))
    scale = np.where(peak > 0, peak / INT8_LIMIT, 1.0)
    rows = np.clip(np.rint(values / scale[:, None]), -INT8_LIMIT, INT8_LIMIT).astype(np.int8)
    restored = rows.astype(np.float64) * scale[:, None]
    error = np.linalg.norm(values.astype(np.float64) - restored, axis=1)
    norm = np.linalg.norm(restored, axis=1)
    l1 = np.abs(rows.astype(np.int64)).sum(axis=1).astype(np.float64)
    return Quantised(np.ascontiguousarray(rows), scale, l1, error, norm)


def exact(matrix: np.ndarray, rows: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """The float32 cosines of ``matrix[rows]`` to ``vector``: the branch's exact values, one
    row's dot product computed alike however many rows are asked (einsum's own loop, not a BLAS
    thread pool competing with every other process for the cores)."""
    picked = matrix[rows]
    result: np.ndarray = np.einsum("ij,j->i", picked, vector)
    return result


def head(low: np.ndarray, high: np.ndarray, floors: np.ndarray, depth: int) -> np.ndarray:
    """Which rows can be among the ``depth`` most significant that exceed their floor, given
    each row's significance lies in ``[low, high]``: those whose ``high`` exceeds their floor and
    reaches the ``depth``-th largest ``low`` among the rows sure to exceed theirs."""
    possible = high > floors
    sure = low > floors
    if depth > 0 and int(sure.sum()) >= depth:
        threshold = float(np.partition(low[sure], -depth)[-depth])
        possible &= high >= threshold
    return possible


# The significance of cosines ``sims`` of the rows at ``positions`` (of the rows scored; None: all
# of them, in order): an increasing function of each cosine, its slope and offset the row's own.
Significance = Callable[[np.ndarray, np.ndarray | None], np.ndarray]


@dataclass(frozen=True)
class Head:
    """``chosen``: positions (into the rows asked) ranked, most significant first; ``scored``: the
    positions scored exactly, with their cosines ``sims`` and significances ``z``."""

    chosen: np.ndarray
    scored: np.ndarray
    sims: np.ndarray
    z: np.ndarray


def _ranked(z: np.ndarray, floors: np.ndarray, order: np.ndarray, depth: int) -> np.ndarray:
    close = np.nonzero(z > floors)[0]
    best: np.ndarray = close[np.lexsort((order[close], -z[close]))][:depth]
    return best


def ranked_head(
    matrix: np.ndarray,
    quant: Quantised,
    rows: np.ndarray,
    vector: np.ndarray,
    significance: Significance,
    floors: np.ndarray,
    order: np.ndarray,
    depth: int,
) -> Head:
    """The ``depth`` most significant of ``matrix[rows]`` that exceed their ``floors``, ties by
    ``order``: from the int8 copy, the head rescored exactly (see the module's docstring)."""
    query = quantised(vector)
    if len(rows) < GATHER_BELOW * len(quant.rows):
        approximate, bound = quant.bounds(query, rows)
    else:
        every, every_bound = quant.bounds(query)
        approximate, bound = every[rows], every_bound[rows]
    low = significance(approximate - bound, None)
    high = significance(approximate + bound, None)
    scored = np.nonzero(head(low, high, floors, depth))[0]
    sims = exact(matrix, rows[scored], vector)
    z = significance(sims, scored)
    chosen = scored[_ranked(z, floors[scored], order[scored], depth)]
    return Head(chosen, scored, sims, z)


def ranked_exactly(
    matrix: np.ndarray,
    rows: np.ndarray,
    vector: np.ndarray,
    significance: Significance,
    floors: np.ndarray,
    order: np.ndarray,
    depth: int,
) -> np.ndarray:
    """The plain definition ``ranked_head`` answers like: every row scored exactly."""
    z = significance(exact(matrix, rows, vector), None)
    return _ranked(z, floors, order, depth)
