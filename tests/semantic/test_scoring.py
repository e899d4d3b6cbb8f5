"""The int8 scoring with exact rescoring of the head ranks as exact float scoring of every row."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from semantic import scoring


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    matrix = rng.normal(size=(n, d)).astype(np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: np.ndarray = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    return unit


World = tuple[np.ndarray, np.ndarray, np.ndarray, scoring.Significance, np.ndarray, np.ndarray]


def _world(seed: int, n: int, d: int, duplicates: int, admitted: float) -> World:
    """A scope of ``n`` unit rows (some repeated, so exact ties occur; some close to the query),
    the rows a gate admits, the query, and per row an increasing affine significance like the
    branch's (query end and item end, each with its own deviation)."""
    rng = np.random.default_rng(seed)
    matrix = _unit(rng, n, d)
    if duplicates and n > 1:
        for _ in range(duplicates):
            matrix[rng.integers(n)] = matrix[rng.integers(n)]
    query = _unit(rng, 1, d)[0]
    near = rng.choice(n, size=max(1, n // 10), replace=False)
    matrix[near] = _unit(rng, 1, d)[0] * 0.2 + query * 0.8 + matrix[near] * 0.1
    matrix[near] /= np.linalg.norm(matrix[near], axis=1, keepdims=True)
    matrix = np.ascontiguousarray(matrix.astype(np.float32))
    rows = np.nonzero(rng.random(n) < admitted)[0]
    mean = rng.uniform(-0.1, 0.3, size=len(rows))
    sd = rng.uniform(0.02, 0.2, size=len(rows))
    query_sd = float(rng.uniform(0.03, 0.2))

    def significance(sims: np.ndarray, positions: np.ndarray | None) -> np.ndarray:
        s = sims.astype(np.float64)
        m, d = (mean, sd) if positions is None else (mean[positions], sd[positions])
        z: np.ndarray = ((s - 0.1) / query_sd + (s - m) / d) / 2
        return z

    floors = rng.choice([-1.0, 0.5, 2.0, 4.0], size=len(rows))
    order = rng.permutation(len(rows))
    return matrix, rows, query, significance, floors, order


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 400),
    d=st.sampled_from([4, 16, 64, 384]),
    duplicates=st.integers(0, 20),
    admitted=st.sampled_from([0.1, 0.6, 1.0]),
    depth=st.integers(1, 25),
)
def test_the_int8_head_rescored_exactly_ranks_as_exact_scoring_of_every_row(
    seed: int, n: int, d: int, duplicates: int, admitted: float, depth: int
) -> None:
    matrix, rows, query, significance, floors, order = _world(seed, n, d, duplicates, admitted)
    quant = scoring.quantised(matrix)
    found = scoring.ranked_head(matrix, quant, rows, query, significance, floors, order, depth)
    expected = scoring.ranked_exactly(matrix, rows, query, significance, floors, order, depth)
    assert found.chosen.tolist() == expected.tolist()
    # What the head reports of each row it scored is the exact value.
    exact = scoring.exact(matrix, rows, query)
    assert np.array_equal(found.sims, exact[found.scored])


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.sampled_from([8, 384]))
def test_the_int8_cosine_is_within_its_bound_of_the_float_cosine(seed: int, d: int) -> None:
    rng = np.random.default_rng(seed)
    matrix = _unit(rng, 200, d)
    matrix[:3] = 0.0  # an empty row (a text naming nothing) too
    query = _unit(rng, 1, d)[0]
    approximate, bound = scoring.quantised(matrix).bounds(scoring.quantised(query))
    truth = matrix.astype(np.float64) @ query.astype(np.float64)
    assert (np.abs(approximate - truth) <= bound).all()


def test_only_a_small_head_is_scored_again_in_floats() -> None:
    """The bound is tight enough to matter: of 5,000 embedding-like rows, the rows rescored are
    a small share (the rest are decided by their int8 cosine alone)."""
    matrix, rows, query, significance, floors, order = _world(7, 5000, 384, 0, 1.0)
    quant = scoring.quantised(matrix)
    found = scoring.ranked_head(matrix, quant, rows, query, significance, floors, order, 20)
    assert len(found.chosen) == 20
    assert len(found.scored) < 0.2 * len(rows)
