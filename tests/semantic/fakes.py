"""Embedders for testing the plumbing of the vector branch, deterministic and instant.

``Concepts`` maps a text to the concept groups its words belong to (one dimension each), so two
texts sharing no token can still be near: "threshold" and 满减 both belong to the threshold
concept. A text naming no concept is the zero vector, similar to nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from semantic.embedders import normalised

CONCEPTS = (
    ("门槛", "满减", "threshold", "起用金额"),
    ("新店", "新开", "new store", "开业"),
    ("外卖", "delivery", "配送"),
    ("积分", "points", "会员"),
)


def concept_vector(text: str) -> np.ndarray:
    lowered = text.lower()
    return np.array(
        [sum(lowered.count(word) for word in group) for group in CONCEPTS], dtype=np.float32
    )


class Concepts:
    name = "fake:concepts-v1"
    dim = len(CONCEPTS)

    def __init__(self) -> None:
        self.queried: list[str] = []
        self.embedded: list[str] = []

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        self.queried.extend(texts)
        return normalised([concept_vector(t) for t in texts])

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.extend(texts)
        return normalised([concept_vector(t) for t in texts])


class OtherModel(Concepts):
    """The same vectors under another model's name: never compared with the first's."""

    name = "fake:concepts-v2"


class Failing(Concepts):
    """Packs like ``Concepts`` but fails every query (an embedder that went down)."""

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        raise ConnectionError("embedding server refused the connection")


RELEASE = threading.Event()


class Hanging(Concepts):
    """Packs like ``Concepts`` but a query waits until ``RELEASE`` is set (a hung server)."""

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        RELEASE.wait()
        return super().queries(texts)


# Factories named by SEMANTIC_EMBEDDER (one instance per configuration, as the product keeps).
concepts = Concepts
other_model = OtherModel
failing = Failing
hanging = Hanging


# --- merges by meaning ---------------------------------------------------------------------------

# Topics and the concepts inside them, each a dimension. A text's vector is mostly its language
# (as a small multilingual model's is: two Chinese texts of one topic are close whatever they
# say), then its topics and concepts, then a little noise of its own.
SHAPED_TOPICS = (("优惠", "discount"),)
SHAPED_CONCEPTS = (
    ("优惠券", "coupon"),
    ("会员价", "member price"),
    ("门店限定", "store-limited"),
)
SHAPED_NOISE = 16


def shaped_vector(text: str) -> np.ndarray:
    import hashlib

    from semantic.duplicates import ZH, language

    lowered = text.lower()
    zh = language(text) == ZH
    groups = (*SHAPED_TOPICS, *SHAPED_CONCEPTS)
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    noise = np.random.default_rng(seed).normal(size=SHAPED_NOISE) * 0.1
    return np.concatenate(
        [
            [5.0 if zh else 0.0, 0.0 if zh else 5.0],
            [1.0 if any(word in lowered for word in group) else 0.0 for group in groups],
            noise,
        ]
    ).astype(np.float32)


class Shaped(Concepts):
    name = "fake:shaped-v1"
    dim = 2 + len(SHAPED_TOPICS) + len(SHAPED_CONCEPTS) + SHAPED_NOISE

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        self.queried.extend(texts)
        return normalised([shaped_vector(t) for t in texts])

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.extend(texts)
        return normalised([shaped_vector(t) for t in texts])


shaped = Shaped
