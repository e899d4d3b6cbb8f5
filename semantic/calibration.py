"""When a similarity means something: significance per query and language, and relevance.

A small multilingual model's cosines between any two texts of one domain sit in a narrow band,
and the band moves with the query and with the languages compared: a Chinese question is 0.85
similar to unrelated Chinese items and 0.82 to the English item that answers it. A fixed floor
on the cosine therefore answers everything in one language and nothing across languages.

So a similarity is judged against ordinary texts in each language: the *reference*
(``semantic/reference/background.json``, texts of a shop's day, none an answer to a support
question), embedded once per model both as passages and as queries and kept as ``ItemVector``
rows of the spaces ``background`` and ``background-query``. Judged from both ends:

- from the query's: how many standard deviations the cosine stands above the query's cosines to
  the reference passages in the item's language, ``(cos − mean) / sd``;
- from the item's: how many it stands above the item's cosines to the reference queries in the
  query's language (worked out when the scope is packed: ``PackedMatrix.item_null``), which
  discounts an item that is close to everything (a hub).

An item's **significance** is the mean of the two. Measured on labelled bilingual pairs, the
two-ended figure kept the same ranking quality as the query's end alone and separated answers
from the best item of questions nothing answers better (bench/README.md).

The vector branch ranks only items whose significance exceeds the model's **floor**: the
highest significance that the best item of any labelled question nothing answers reached
(``calibrate_semantic`` fits it; the shipped model's is in
``semantic/reference/calibration.json``). So an item found by meaning alone is one more
significant than meaning ever made an unrelated item look, in either language.

Two logistic curves turn evidence into one **relevance**, the estimated probability that the
item answers the query, fitted by maximum likelihood on the same labelled questions:

- ``vector``: of the significance, over the items a ranking could return (each question's most
  significant few);
- ``lexical``: of the share of the query's tokens the item holds (raw or expanded, the larger),
  the same for every model.

An item's relevance is the larger of the two it has evidence for. A model with no fitted curve
uses ``SEMANTIC_SIGNIFICANCE`` as its floor (default 3.5) and a curve that reaches one half
there, until its operator fits one.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
from django.conf import settings

REFERENCE = Path(__file__).resolve().parent / "reference"
BACKGROUND_FILE = REFERENCE / "background.json"
CALIBRATION_FILE = REFERENCE / "calibration.json"
BACKGROUND_SPACE = "background"
BACKGROUND_QUERY_SPACE = "background-query"

# Languages told apart, by code (``PackedMatrix.languages`` holds one byte per entry).
LANGUAGES = ("en", "zh")
EN, ZH = 0, 1

DEFAULT_FLOOR = 3.5
# The slope of the curve a model without a fitted one gets: one half at the floor, 0.9 one
# standard deviation above it.
DEFAULT_SLOPE = math.log(9.0)
# A reference whose cosines do not vary (a test embedder's orthogonal texts) still divides.
_LEAST_SD = 1e-6

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def language_code(text: str) -> int:
    """``ZH`` when Chinese characters carry the text (one counts as much as three Latin
    letters, about a word), else ``EN``. A Chinese ticket that names a product in English is
    Chinese; an English one quoting a shop's Chinese name is English."""
    han = len(_HAN.findall(text))
    latin = len(_LATIN.findall(text))
    return ZH if han and han * 3 >= latin else EN


def language_codes(texts: Iterable[str]) -> np.ndarray:
    return np.array([language_code(text) for text in texts], dtype=np.uint8)


def language(text: str) -> str:
    return LANGUAGES[language_code(text)]


# --- the curves ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Logistic:
    """p(x) = 1 / (1 + exp(−(a·x + b)))."""

    a: float
    b: float

    def __call__(self, x: float) -> float:
        t = self.a * x + self.b
        if t >= 0:
            return 1.0 / (1.0 + math.exp(-t))
        e = math.exp(t)
        return e / (1.0 + e)

    def at(self, p: float) -> float:
        """The x at which the curve reaches ``p``."""
        return (math.log(p / (1.0 - p)) - self.b) / self.a

    def as_json(self) -> dict[str, float]:
        return {"a": round(self.a, 6), "b": round(self.b, 6)}


def fitted_logistic(
    x: Sequence[float], y: Sequence[int], *, balanced: bool = False, ridge: float = 1e-3
) -> Logistic:
    """Maximum-likelihood logistic regression of ``y`` (0/1) on ``x`` (one feature)."""
    weights = fitted_weights(
        np.asarray(x, dtype=np.float64)[:, None], y, balanced=balanced, ridge=ridge
    )
    return Logistic(float(weights[0]), float(weights[1]))


def fitted_weights(
    features: np.ndarray, y: Sequence[int], *, balanced: bool = False, ridge: float = 1e-3
) -> np.ndarray:
    """Maximum-likelihood logistic regression of ``y`` (0/1) on the columns of ``features``,
    their weights then the intercept (Newton's method, a small ridge so a perfectly separated
    set still has finite weights). ``balanced``: positives and negatives weighted to count alike
    (the curve then does not learn how rare answers are)."""
    xs = np.asarray(features, dtype=np.float64)
    ys = np.asarray(y, dtype=np.float64)
    positives = max(float(ys.sum()), 1.0)
    negatives = max(float(len(ys) - ys.sum()), 1.0)
    weights = (
        np.where(ys > 0, 0.5 / positives, 0.5 / negatives) * len(ys)
        if balanced
        else np.ones_like(ys)
    )
    design = np.column_stack([xs, np.ones(len(xs))])
    size = design.shape[1]
    beta = np.zeros(size)
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(design @ beta)))
        gradient = design.T @ (weights * (ys - p)) - ridge * beta
        hessian = (design * (weights * p * (1 - p))[:, None]).T @ design + ridge * np.eye(size)
        step = np.linalg.solve(hessian, gradient)
        beta = beta + step
        if float(np.abs(step).max()) < 1e-9:
            break
    return beta


# The chance, per question nothing answers, that an item of a scope is ranked by meaning alone
# because the unrelated items of the scope are many (a family-wise error rate). One in twenty let
# two of the sixteen questions nothing answers in fixtures/eval/ through (an English question to a
# Chinese item); one in a hundred lets none and keeps the answers (README, "Measuring retrieval").
FAMILY_ERROR = 0.01


@dataclass(frozen=True)
class PairNull:
    """How significant unrelated items of one language pair came out in the labelled questions
    nothing answers: the highest, and the mean and deviation of all."""

    highest: float
    mean: float
    sd: float

    def floor(self, items: int) -> float:
        """What an item must exceed in a scope holding ``items`` items of its language: more
        than any unrelated item of the labelled questions reached, and more than the largest of
        ``items`` unrelated items would reach by chance once in a hundred (the fitted null, with a
        Bonferroni correction: a large scope needs a larger significance)."""
        chance = NormalDist().inv_cdf(1.0 - FAMILY_ERROR / max(items, 1))
        return max(self.highest, self.mean + self.sd * chance)

    def as_json(self) -> dict[str, float]:
        return {
            "highest": round(self.highest, 3),
            "mean": round(self.mean, 3),
            "sd": round(self.sd, 3),
        }


@dataclass(frozen=True)
class Calibration:
    """The curves and the floor of one model (``source``: ``fitted`` from labelled pairs, or
    ``default``). ``floor``: the significance an item must exceed to be ranked by meaning."""

    model: str
    vector: Logistic
    lexical: Logistic
    floor: float
    source: str
    # Both at once where the vector branch scored the item: (weight of the significance, of the
    # share of words, intercept). An item whose words match but whose meaning does not is less
    # likely to answer than its words alone say.
    joint: tuple[float, float, float] | None = None
    # Per (query language, item language) code: the null of that pair as fitted, the highest
    # significance an unrelated item reached, and the mean and deviation of all of them.
    nulls: tuple[tuple[PairNull | None, ...], ...] | None = None

    def floors(self, asked: int, codes: np.ndarray) -> np.ndarray:
        """The floor each item must exceed, by its language and the question's, and by how many
        items of its language the scope holds (``PairNull.floor``)."""
        if self.nulls is None:
            return np.full(len(codes), self.floor)
        found = np.full(len(codes), self.floor)
        for code in np.unique(codes):
            null = self.nulls[asked][int(code)]
            if null is not None:
                chosen = codes == code
                found[chosen] = null.floor(int(chosen.sum()))
        return found

    def relevance(self, significance: float | None, share: float | None) -> float:
        """The estimated probability that an item answers the query, from what found it: its
        significance where the vector branch scored it, the share of the query's words it holds
        where a lexical branch found it."""
        words = share if share is not None and share > 0 else 0.0
        if significance is not None and not math.isfinite(significance):
            return 1.0 if significance > 0 else round(self.lexical(words) if words else 0.0, 3)
        if significance is not None and self.joint is not None:
            a, c, b = self.joint
            return round(Logistic(1.0, 0.0)(a * significance + c * words + b), 3)
        best = 0.0
        if significance is not None:
            best = max(best, self.vector(significance))
        if words:
            best = max(best, self.lexical(words))
        return round(best, 3)


def _default_floor() -> float:
    return float(getattr(settings, "SEMANTIC_SIGNIFICANCE", DEFAULT_FLOOR))


def _curves_file() -> Path:
    configured = getattr(settings, "SEMANTIC_CALIBRATION_FILE", "")
    return Path(configured) if configured else CALIBRATION_FILE


@cache
def _read_curves(path: str, _stamp: float) -> dict[str, Any]:
    try:
        loaded: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return loaded


def curves() -> dict[str, Any]:
    """The calibration file as read (re-read when it changes)."""
    path = _curves_file()
    try:
        stamp = path.stat().st_mtime
    except OSError:
        return {}
    return _read_curves(str(path), stamp)


def _logistic(value: Mapping[str, Any] | None) -> Logistic | None:
    if not value:
        return None
    return Logistic(float(value["a"]), float(value["b"]))


# The share-of-words curve before any fit: one half at a third of the query's words.
_DEFAULT_LEXICAL = Logistic(9.0, -3.0)


def _pair_null(value: Mapping[str, Any] | None) -> PairNull | None:
    if not value:
        return None
    return PairNull(float(value["highest"]), float(value["mean"]), float(value["sd"]))


def for_model(model: str) -> Calibration:
    """The calibration of ``model`` (the embedder's name): fitted when the calibration file has
    the model, else the default floor. The lexical curve is the file's, for every model."""
    found = curves()
    lexical = _logistic(found.get("lexical")) or _DEFAULT_LEXICAL
    entry = (found.get("models") or {}).get(model) or {}
    fitted = _logistic(entry.get("curve"))
    if fitted is not None and fitted.a > 0 and "floor" in entry:
        floor = float(entry["floor"])
        joint = entry.get("joint")
        weights = (
            (float(joint["significance"]), float(joint["share"]), float(joint["b"]))
            if joint
            else None
        )
        pairs = entry.get("nulls") or {}
        nulls = tuple(
            tuple(_pair_null(pairs.get(f"{asked}>{item}")) for item in LANGUAGES)
            for asked in LANGUAGES
        )
        return Calibration(model, fitted, lexical, floor, "fitted", weights, nulls)
    floor = _default_floor()
    return Calibration(
        model, Logistic(DEFAULT_SLOPE, -DEFAULT_SLOPE * floor), lexical, floor, "default"
    )


def lexical_only() -> Calibration:
    """The calibration of an answer the vector branch did not score (off or unavailable)."""
    return for_model("")


# --- the reference ---------------------------------------------------------------------------


@cache
def background_texts() -> dict[str, str]:
    """The reference texts by item name (``en:0``, ``zh:3``…)."""
    loaded = json.loads(BACKGROUND_FILE.read_text(encoding="utf-8"))
    return {
        f"{lang}:{i}": text
        for lang in LANGUAGES
        for i, text in enumerate(loaded["texts"].get(lang, []))
    }


@dataclass(frozen=True)
class Reference:
    """The reference texts' vectors of one model, per language code, as passages (against
    which a query is judged) and as queries (against which an item is)."""

    model: str
    passages: tuple[np.ndarray, ...]
    queries: tuple[np.ndarray, ...]

    def query_null(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per language code, the mean and standard deviation of the query's cosines to the
        reference passages of that language."""
        stats = _null(self.passages, query[None, :]).astype(np.float64)
        return stats[:, 0, 0], stats[:, 1, 0]

    def item_null(self, matrix: np.ndarray) -> np.ndarray:
        """Per row of ``matrix`` (an item's vector), per language code, the mean and standard
        deviation of its cosines to the reference queries of that language: shape (n, 4), the
        language's mean at 2·code and its deviation at 2·code + 1 (float32)."""
        stats = _null(self.queries, matrix)  # (languages, 2, n)
        return np.ascontiguousarray(stats.transpose(2, 0, 1).reshape(len(matrix), -1))

    def significance(
        self,
        query: np.ndarray,
        sims: np.ndarray,
        codes: np.ndarray,
        item_null: np.ndarray | None,
        query_code: int,
        query_null: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """The significance of each of ``sims`` (cosines of the query to items whose language
        codes are ``codes`` and whose item-end statistics are ``item_null``, None when the scope
        was packed without them: then the query's end alone). ``query_null``: the query's
        ``query_null`` when the caller has it already."""
        means, sds = query_null if query_null is not None else self.query_null(query)
        from_query: np.ndarray = (sims.astype(np.float64) - means[codes]) / sds[codes]
        if item_null is None:
            return from_query
        mean = item_null[:, 2 * query_code].astype(np.float64)
        sd = np.maximum(item_null[:, 2 * query_code + 1].astype(np.float64), _LEAST_SD)
        from_item: np.ndarray = (sims.astype(np.float64) - mean) / sd
        both: np.ndarray = (from_query + from_item) / 2
        return both


def _null(references: tuple[np.ndarray, ...], vectors: np.ndarray) -> np.ndarray:
    """Per language, the mean and deviation of each of ``vectors``' cosines to that language's
    reference rows: shape (languages, 2, len(vectors)), float32."""
    stats = np.zeros((len(LANGUAGES), 2, len(vectors)), dtype=np.float32)
    stats[:, 1, :] = _LEAST_SD
    for code, matrix in enumerate(references):
        if len(matrix) and len(vectors):
            sims = matrix @ vectors.T  # (reference rows, vectors)
            stats[code, 0] = sims.mean(axis=0)
            stats[code, 1] = np.maximum(sims.std(axis=0), _LEAST_SD)
    return stats


_references: dict[str, Reference] = {}
_references_lock = threading.Lock()


def reference(model: str, dim: int) -> Reference | None:
    """The reference of ``model`` as stored (kept per process once whole), or None while the
    worker has not embedded it yet: then no item is significant by meaning alone."""
    with _references_lock:
        kept = _references.get(model)
    if kept is not None:
        return kept
    from semantic.models import ItemVector  # the models load after the app registry

    texts = background_texts()
    found: dict[str, tuple[np.ndarray, ...]] = {}
    for space in (BACKGROUND_SPACE, BACKGROUND_QUERY_SPACE):
        # Only vectors of the texts as shipped now: a reference changed by an upgrade is embedded
        # again by the worker before it is used.
        rows = {
            item: bytes(vector)
            for item, digest, vector in ItemVector.objects.filter(
                space=space, model=model, item__in=list(texts)
            ).values_list("item", "text_hash", "vector")
            if digest == hashlib.sha256(texts[item].encode("utf-8")).hexdigest()
        }
        if len(rows) < len(texts):
            return None
        by_language = []
        for lang in LANGUAGES:
            names = [name for name in texts if name.startswith(f"{lang}:")]
            vectors = [np.frombuffer(rows[name], dtype=np.float32) for name in names]
            matrix = np.stack(vectors) if vectors else np.zeros((0, dim), dtype=np.float32)
            if matrix.shape[1] != dim:
                return None
            by_language.append(matrix)
        found[space] = tuple(by_language)
    built = Reference(model, found[BACKGROUND_SPACE], found[BACKGROUND_QUERY_SPACE])
    with _references_lock:
        _references[model] = built
    return built


def references_cleared() -> None:
    with _references_lock:
        _references.clear()


# --- fitting ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelledSet:
    """One scope's items (``id -> text``) and questions (text, the ids that answer it; none:
    nothing in the set answers it), with the share of each question's tokens each item holds
    (``shares[q][item]``, worked out by the caller's tokenizer; only items sharing a token)."""

    name: str
    items: Mapping[str, str]
    queries: Sequence[tuple[str, frozenset[str]]]
    shares: Sequence[Mapping[str, float]]


def reference_of(embedder: Any) -> Reference:
    """The reference embedded now by ``embedder`` (no stored vectors read or written)."""
    texts = background_texts()
    parts = []
    for embed in (embedder.passages, embedder.queries):
        parts.append(
            tuple(
                np.asarray(
                    embed([t for name, t in texts.items() if name.startswith(f"{lang}:")]),
                    dtype=np.float32,
                )
                for lang in LANGUAGES
            )
        )
    return Reference(embedder.name, parts[0], parts[1])


@dataclass(frozen=True)
class Scored:
    """One labelled question: the significance of every item of its set, which answer it, the
    items' language codes and the question's."""

    z: np.ndarray
    answers: np.ndarray
    codes: np.ndarray
    asked: int


def significances(embedder: Any, labelled: LabelledSet, reference: Reference) -> list[Scored]:
    """Per question of ``labelled``: the significance of every item, and which items answer."""
    ids = list(labelled.items)
    texts = [labelled.items[i] for i in ids]
    matrix = np.asarray(embedder.passages(texts), dtype=np.float32)
    codes = language_codes(texts)
    nulls = reference.item_null(matrix)
    vectors = np.asarray(embedder.queries([q for q, _ in labelled.queries]), dtype=np.float32)
    found = []
    for (question, answers), vector in zip(labelled.queries, vectors, strict=True):
        asked = language_code(question)
        z = reference.significance(vector, matrix @ vector, codes, nulls, asked)
        found.append(Scored(z, np.array([i in answers for i in ids]), codes, asked))
    return found


# How many of a question's items, most significant first, the relevance curve is fitted on: the
# items a ranking could return, not the whole set (whose many plainly unrelated items would only
# teach the curve how rare answers are).
CANDIDATES = 10


def fitted(embedder: Any, sets: Sequence[LabelledSet]) -> dict[str, Any]:
    """The curves fitted on ``sets``, and the floors.

    - The vector curve: maximum likelihood over each question's ``CANDIDATES`` most significant
      items, answer or not: the probability that such an item answers.
    - The nulls, per (question language, item language): how significant the items of the
      questions nothing answers came out (``PairNull``: the highest, the mean and deviation). A
      model's meaning is weaker across languages than within one, and so is the significance of
      an unrelated item in the other language: each pair gets its own floor. ``floor``: the
      highest of them, for pairs without an example, or where the curve reaches one half when
      the sets hold no question nothing answers.
    - The lexical curve: over every item sharing a token with its question.
    - The joint curve, of the significance and the share of words together, where the vector
      branch scored the item: over both kinds of items above.

    The report says what the floors do on each set."""
    reference = reference_of(embedder)
    z_all: list[float] = []
    y_all: list[int] = []
    share_all: list[float] = []
    share_y: list[int] = []
    joint_rows: list[tuple[float, float]] = []
    joint_y: list[int] = []
    unrelated: dict[tuple[int, int], list[float]] = {}
    per_set = []
    for labelled in sets:
        scored = significances(embedder, labelled, reference)
        ids = list(labelled.items)
        for one, shares in zip(scored, labelled.shares, strict=True):
            if not one.answers.any():
                for code in np.unique(one.codes):
                    values = one.z[one.codes == code].tolist()
                    unrelated.setdefault((one.asked, int(code)), []).extend(values)
            top = np.argsort(-one.z, kind="stable")[:CANDIDATES]
            z_all.extend(float(v) for v in one.z[top])
            y_all.extend(int(a) for a in one.answers[top])
            chosen = {int(i) for i in top}
            for index, (item, answer) in enumerate(zip(ids, one.answers, strict=True)):
                share = shares.get(item, 0.0)
                if share > 0:
                    share_all.append(share)
                    share_y.append(int(answer))
                if share > 0 or index in chosen:
                    joint_rows.append((float(one.z[index]), share))
                    joint_y.append(int(answer))
        per_set.append((labelled.name, scored))
    curve = fitted_logistic(z_all, y_all)
    nulls = {
        pair: PairNull(max(values), float(np.mean(values)), float(np.std(values)))
        for pair, values in unrelated.items()
    }
    floor = max(n.highest for n in nulls.values()) if nulls else curve.at(0.5)
    calibrated = Calibration(
        embedder.name,
        curve,
        _DEFAULT_LEXICAL,
        floor,
        "fitted",
        None,
        tuple(
            tuple(nulls.get((asked, item)) for item in range(len(LANGUAGES)))
            for asked in range(len(LANGUAGES))
        ),
    )
    lexical = fitted_logistic(share_all, share_y) if share_all else None
    joint = fitted_weights(np.array(joint_rows), joint_y) if joint_rows else None

    def over(one: Scored) -> np.ndarray:
        return one.z > calibrated.floors(one.asked, one.codes)

    report = []
    for name, scored in per_set:
        answered = [one for one in scored if one.answers.any()]
        nothing = [one for one in scored if not one.answers.any()]
        report.append(
            {
                "set": name,
                "questions": len(scored),
                "answers": sum(int(one.answers.sum()) for one in answered),
                "answers_reaching_floor": sum(
                    int((over(one) & one.answers).sum()) for one in answered
                ),
                "other_items_reaching_floor": sum(
                    int((over(one) & ~one.answers).sum()) for one in answered
                ),
                "nothing_questions": len(nothing),
                "nothing_questions_answered": sum(int(over(one).any()) for one in nothing),
            }
        )
    return {
        "model": embedder.name,
        "curve": curve.as_json(),
        "floor": round(floor, 3),
        "nulls": {
            f"{LANGUAGES[asked]}>{LANGUAGES[item]}": null.as_json()
            for (asked, item), null in sorted(nulls.items())
        },
        "lexical": lexical.as_json() if lexical is not None else None,
        "joint": (
            {
                "significance": round(float(joint[0]), 6),
                "share": round(float(joint[1]), 6),
                "b": round(float(joint[2]), 6),
            }
            if joint is not None
            else None
        ),
        "pairs": len(z_all),
        "nothing_questions": sum(one["nothing_questions"] for one in report),
        "sets": report,
    }
