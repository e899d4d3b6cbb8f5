"""Merges by meaning: when two items' texts tell the same experience.

Raw cosine is not the answer with a small multilingual model: it measures "same language, same
topic" first. With multilingual-e5-small, two different Chinese incidents on one topic (a
store-limited coupon and a member price) score 0.90-0.94, above a translation of one lesson
(0.80-0.87) and above the same lesson told in other English words (0.87-0.95). The rule here
therefore reads two signals (measured on ``fixtures/merges/pairs.json`` by
``bench/bench_merges.py``; the reasoning is in docs/architecture.md, "Merges by meaning"):

1. **Significance against a background.** Each text's similarity to the other is read against how
   similar that text is to a fixed reference set of unrelated shop-floor texts *in the other
   text's language* (:data:`REFERENCE`): ``z = (cos - mean) / sigma``, symmetrised over the two
   texts, where ``mean`` is the text's mean cosine to the reference texts of the other's language
   (a per-text hubness correction, CSLS-like) and ``sigma`` the spread of the model's similarities
   between reference texts of those two languages. The language pair's offset (Chinese texts are
   all close to one another, a translation sits lower than a paraphrase) is gone: the score says
   how far above "anything of that language" the pair is.
2. **The operator's lexicon as shared concepts.** Every lexicon term (and canonical word) found in
   a text stands for its concept (the words the lexicon links); two texts *agree* when they share
   at least half of the concepts either names (``|A ∩ B| / |A ∪ B| >= 1/2``). A bilingual lexicon
   (优惠券 → coupon, voucher → coupon) makes a translation agree, and two incidents on one topic
   disagree on the concepts that tell them apart (coupon vs member price, last order vs
   renovation).

A pair is proposed when its significance is at least ``alone`` (meaning alone is enough: set
above every pair of different incidents the calibration set holds, with a margin), or, for texts
in two languages, when their concepts agree and its significance is at least ``agree`` (three
spreads above the background: the usual bar of a significant deviation, not fitted to the
labelled pairs). The lexicon bridges languages; in one language meaning alone decides. The
thresholds belong to the model (:data:`CALIBRATED`); settings may override them for another.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from semantic.calibration import language as language
from semantic.embedders import Embedder

EN = "en"
ZH = "zh"
LANGUAGES = (EN, ZH)

# Unrelated shop-floor texts, one set per language (not translations of each other, none about
# the subjects merges are usually about). They are the background a pair's similarity is read
# against; changing them changes every significance, so the calibration is measured again.
REFERENCE: dict[str, tuple[str, ...]] = {
    EN: (
        "The ice machine in the back room stopped making ice during the afternoon rush.",
        "A new staff member was not on the weekly schedule and missed the first shift.",
        "Tapioca pearls were cooked too long and turned mushy; the batch was thrown away.",
        "The store ran out of large cups on Saturday because the warehouse truck was late.",
        "A health inspector asked for the fridge temperature log, which had gaps on two days.",
        "The card terminal asked for a PIN on every small payment after a software update.",
        "Fresh milk arrived two degrees warmer than allowed and was refused at the door.",
        "A customer found the sugar level of her drink different from what she had chosen.",
        "The music system played too loud at opening because the volume was not reset.",
        "The cashier's drawer was short by fifty yuan at the end of the evening shift.",
        "Staff forgot to switch on the sign outside, so passers-by thought the shop was closed.",
        "A reusable cup brought by a customer was cracked and leaked at the counter.",
        "The water filter warning light came on and the tea tasted bitter.",
        "Training for the seasonal menu was held after the new drinks had already launched.",
        "A supplier changed the size of the syrup bottles and the pump dosed the wrong amount.",
        "The air conditioner dripped onto the counter during a humid week.",
    ),
    ZH: (
        "后厨制冰机在下午高峰期停止出冰。",
        "新员工没有排进本周班表，错过了第一次上班。",
        "珍珠煮得太久变得软烂，整锅只能倒掉。",
        "周六门店大杯用完了，因为仓库送货晚了。",
        "卫生检查员要看冰箱温度记录，其中有两天没有登记。",
        "刷卡机更新软件后，每笔小额付款都要求输入密码。",
        "鲜奶到货时温度比规定高两度，在门口被拒收。",
        "顾客发现饮品的甜度和她选的不一样。",
        "开门时音响音量太大，因为前一天没有调回。",
        "晚班结束时收银抽屉少了五十元。",
        "店员忘了打开门口的灯牌，路人以为店没开。",
        "顾客自带的环保杯有裂缝，在柜台漏了水。",
        "净水器滤芯提示灯亮了，茶喝起来发苦。",
        "季节菜单的培训在新品上市之后才开。",
        "供应商换了糖浆瓶的规格，定量泵出量不对。",
        "潮湿的一周里空调一直往柜台上滴水。",
    ),
}

# A background whose similarities do not vary (a model mapping every reference text alike, as
# the tests' fake embedders do) is read as varying by this much, so significance stays finite.
SIGMA_FLOOR = 0.01


@dataclass(frozen=True)
class Thresholds:
    """Significance a pair needs: on meaning alone, and when its concepts agree."""

    alone: float
    agree: float


# Per model (the embedder's name up to "@": the package version after it does not change the
# weights), measured by bench/bench_merges.py on fixtures/merges/pairs.json. ``alone`` is the
# highest significance of a pair that must not be proposed (different incidents, unrelated),
# rounded up to a half spread, plus half a spread of margin: multilingual-e5-small (4-bit), 5.42
# → 6.0 (each topic held out in turn: 5.25-5.42 → 6.0). ``agree`` is the three-spread bar.
CALIBRATED: dict[str, Thresholds] = {
    "local:multilingual-e5-small-q4": Thresholds(alone=6.0, agree=3.0),
}
# A model nobody calibrated: the same bars, to be measured with the benchmark (docs/operations.md).
UNCALIBRATED = Thresholds(alone=6.0, agree=3.0)


def thresholds(model: str, *, alone: float | None = None, agree: float | None = None) -> Thresholds:
    """The model's thresholds, each replaced by the value given (a setting) when there is one."""
    known = CALIBRATED.get(model.split("@", 1)[0], UNCALIBRATED)
    return Thresholds(
        alone=known.alone if alone is None else alone,
        agree=known.agree if agree is None else agree,
    )


def concept_pattern(lexicon: Mapping[str, str]) -> tuple[re.Pattern[str], dict[str, str]] | None:
    """One pattern finding every term and canonical word of ``lexicon`` (longest first; a Latin
    term only as a whole word, so "rain" is not found in "training"), and each word's concept.

    A lexicon entry says its two words mean the same, so words linked by entries, in either
    direction or through chains (coupon → 优惠券, 优惠券 → coupon, 代金券 → 优惠券), are one
    concept, named by its least word (case-folded)."""
    parent: dict[str, str] = {}

    def root(word: str) -> str:
        while parent[word] != word:
            parent[word] = parent[parent[word]]
            word = parent[word]
        return word

    for term, canonical in lexicon.items():
        first, second = term.strip().lower(), canonical.strip().lower()
        if not first or not second:
            continue
        for word in (first, second):
            parent.setdefault(word, word)
        low, high = sorted((root(first), root(second)))
        parent[high] = low
    if not parent:
        return None
    concepts = {word: root(word) for word in parent}

    def one(term: str) -> str:
        escaped = re.escape(term)
        if term.isascii():
            return rf"(?<![A-Za-z0-9]){escaped}(?![A-Za-z0-9])"
        return escaped

    ordered = sorted(concepts, key=lambda term: (-len(term), term))
    return re.compile("|".join(one(term) for term in ordered), re.IGNORECASE), concepts


def concepts_in(
    text: str, compiled: tuple[re.Pattern[str], dict[str, str]] | None
) -> frozenset[str]:
    """The concepts (canonical words) the text names, through :func:`concept_pattern`."""
    if compiled is None:
        return frozenset()
    pattern, concepts = compiled
    return frozenset(concepts[match.group().lower()] for match in pattern.finditer(text))


def concepts_agree(first: frozenset[str], second: frozenset[str]) -> bool:
    """At least one shared concept, and at least half of all the concepts the two name."""
    shared = len(first & second)
    return shared > 0 and 2 * shared >= len(first | second)


@dataclass(frozen=True)
class Background:
    """The reference texts' vectors per language, and the spread of similarities between the
    reference texts of each pair of languages, for one model."""

    model: str
    vectors: Mapping[str, np.ndarray]
    sigma: Mapping[tuple[str, str], float]

    def means(self, matrix: np.ndarray, lang: str) -> np.ndarray:
        """Each row's mean cosine to the reference texts of ``lang``."""
        means: np.ndarray = np.asarray(matrix @ self.vectors[lang].T).mean(axis=1)
        return means


def background_of(model: str, vectors: Mapping[str, np.ndarray]) -> Background:
    sigma: dict[tuple[str, str], float] = {}
    for first in LANGUAGES:
        for second in LANGUAGES:
            similar = vectors[first] @ vectors[second].T
            if first == second:
                keep = ~np.eye(len(similar), dtype=bool)
                spreads = [float(row[mask].std()) for row, mask in zip(similar, keep, strict=True)]
            else:
                spreads = [float(row.std()) for row in similar]
            sigma[(first, second)] = max(float(np.mean(spreads)), SIGMA_FLOOR)
    return Background(model, vectors, sigma)


_backgrounds: dict[str, Background] = {}
_background_lock = threading.Lock()


def background(embedder: Embedder) -> Background:
    """The model's background, embedded once per process and model (32 short passages)."""
    with _background_lock:
        kept = _backgrounds.get(embedder.name)
    if kept is not None:
        return kept
    vectors = {lang: embedder.passages(list(REFERENCE[lang])) for lang in LANGUAGES}
    fresh = background_of(embedder.name, vectors)
    with _background_lock:
        _backgrounds[embedder.name] = fresh
    return fresh


def significance(
    cosine: Any,
    *,
    mean_first: Any,
    mean_second: Any,
    languages: tuple[str, str],
    sigma: Mapping[tuple[str, str], float],
) -> Any:
    """How many background spreads the pair's cosine lies above each text's background in the
    other's language, averaged over the two texts. ``mean_first`` is the first text's mean
    cosine to the reference texts of the second's language, and the reverse. Floats, or numpy
    arrays of many pairs."""
    first, second = languages
    return (
        (cosine - mean_first) / sigma[(first, second)]
        + (cosine - mean_second) / sigma[(second, first)]
    ) / 2


def same_experience(significant: float, *, agree: bool, across: bool, bars: Thresholds) -> bool:
    """The merge rule: significant enough on meaning alone; or, for texts in two languages
    (``across``), agreeing concepts and significant enough for them. In one language the texts
    share their words already, and the lexicon's concepts add little the model does not see: a
    lexicon that names only part of two incidents' words (both about refunds, the causes
    unnamed) would make them agree, so there meaning alone decides."""
    return significant >= bars.alone or (across and agree and significant >= bars.agree)


def cleared() -> None:
    """Forget the backgrounds (tests switching embedders)."""
    with _background_lock:
        _backgrounds.clear()
