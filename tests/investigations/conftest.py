from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.contrib.auth.models import User

from experience.cases import services
from experience.cases.models import Skill
from experience.cases.schema import parse_case, parse_skill
from experience.cases.tools import tool_specs
from experience.review import decisions
from tests.experience.conftest import approve_checked, case_data, skill_data
from tests.knowledge.conftest import fixture_documents, knowledge_base

__all__ = ["fixture_documents", "knowledge_base"]

TICKET = "两杯水果茶，优惠券用不了"
AT = "2026-09-18T14:00:00+08:00"
KNOWN = "2026-09-18T14:10:00+08:00"
FULL_FACTS = ("--channel", "miniapp", "--product", "fruit-tea", "--basket-cents", "3200")
STORE_B = (
    "--tenant", "teahouse", "--brand", "leaf-and-cup", "--store", "store-002",
    "--campaign", "campaign-b", "--deployment", "release-1",
)  # fmt: skip
# Memory reviewed before the ticket, so it is usable at its time of knowledge.
REVIEWED_AT = datetime.fromisoformat("2026-09-10T12:00:00+08:00")


@pytest.fixture
def memory(
    knowledge_base: None,
    reviewer: User,
    second_reviewer: User,
    frozen_clock: Callable[[datetime], Any],
) -> Skill:
    """Two approved cases of distinct incidents and the skill citing them, in store B's scope."""
    frozen_clock(REVIEWED_AT)
    ids = []
    for incident, title in [
        ("INC-1", "二号店优惠券无法使用：门店范围漏配"),
        ("INC-2", "二号店水果茶券不可用：商品列表漏配"),
    ]:
        case, _ = services.case_submit(
            content=parse_case(case_data(incident=incident, title=title)), actor=reviewer
        )
        approve_checked(case, actor=second_reviewer)
        ids.append(case.id)
    skill, _ = services.skill_submit(
        content=parse_skill(skill_data(ids), tool_specs()), actor=reviewer
    )
    decisions.skill_approve(skill=skill, actor=second_reviewer, reason="two incidents")
    frozen_clock(datetime.fromisoformat("2026-09-18T14:20:00+08:00"))
    return skill
