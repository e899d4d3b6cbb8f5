"""Ranking with cached token sets equals ranking from the texts, and follows lexicon changes."""

from __future__ import annotations

import random

import pytest
from django.contrib.auth.models import User

from experience.core import domain
from experience.retrieval.pipeline import _ranked
from knowledge.domain import sha256_hex
from knowledge.models import Synonym
from knowledge.services import synonym_set

pytestmark = pytest.mark.django_db

WORDS = ("优惠券", "代金券", "用不了", "无法使用", "水果茶", "小程序", "打印机", "断电", "coupon")


def lexicon() -> dict[str, str]:
    return dict(Synonym.objects.values_list("term", "canonical"))


@pytest.mark.parametrize("seed", range(4))
def test_cached_ranking_equals_ranking_from_the_texts(seed: int) -> None:
    rng = random.Random(seed)
    texts = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))) for _ in range(40)]
    # Ids hash the content, as case and skill ids do.
    items = [(f"case:{sha256_hex([i, text])}", text) for i, text in enumerate(texts)]
    for _ in range(30):
        query = "".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
        chosen = rng.sample(items, rng.randint(1, len(items)))
        assert _ranked(query, chosen) == domain.rank_items(query, chosen, lexicon())


def test_a_lexicon_change_reaches_cached_items(operator: User) -> None:
    items = [("case:" + "a" * 64, "小票打印机断电"), ("case:" + "b" * 64, "积分兑换")]
    assert _ranked("点数", items) == []

    synonym_set(term="点数", canonical="积分", actor=operator)

    assert _ranked("点数", items) == ["case:" + "b" * 64]
    assert _ranked("点数", items) == domain.rank_items("点数", items, lexicon())
