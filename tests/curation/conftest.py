"""Curation fixtures: the shipped thread, cases built through the services, a movable clock."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from curation.models import Thread
from curation.threads import thread_import
from experience.cases import services as experience_services
from experience.cases.models import Case
from experience.cases.schema import parse_case
from tests.experience.conftest import NOW, approve_checked, case_data

THREAD_FILE = Path(settings.BASE_DIR) / "fixtures" / "threads" / "coupon-store-scope.json"
THREAD_ID = "T-20260918-store-002-coupon"


def thread_json() -> dict[str, Any]:
    thread: dict[str, Any] = json.loads(THREAD_FILE.read_text(encoding="utf-8"))
    return thread


def other_wording(incident: str, **changes: Any) -> dict[str, Any]:
    """Another summary of a store-scope incident, worded differently."""
    data = case_data(
        incident=incident,
        title="二号店小程序优惠券用不了，活动门店未包含二号店",
        summary="客户在二号店用小程序下单，优惠券无法使用。",
        observations=[{"source_id": "thread:2#m1", "excerpt": "客户说优惠券用不了"}],
    )
    data["diagnosis"]["statement"] = "活动门店范围没有二号店。"
    data.update(changes)
    return data


def unrelated(incident: str, **changes: Any) -> dict[str, Any]:
    data = case_data(
        incident=incident,
        title="二号店小票打印机断电",
        summary="收银台无法打印小票。",
        observations=[{"source_id": "thread:3#m1", "excerpt": "店员：打印机没反应。"}],
    )
    data["diagnosis"]["statement"] = "插线板松动导致断电。"
    data.update(changes)
    return data


@pytest.fixture
def at_now(frozen_clock: Callable[[datetime], Any]) -> datetime:
    frozen_clock(NOW)
    return NOW


@pytest.fixture
def thread(operator: User, at_now: datetime) -> Thread:
    imported, _ = thread_import(data=thread_json(), actor=operator)
    return imported


@pytest.fixture
def submit(reviewer: User, at_now: datetime) -> Callable[..., Case]:
    """Submit as the reviewer (who may mark evidence verified) unless another actor is named."""

    def make(data: dict[str, Any], *, actor: User | None = None, via: str = "console") -> Case:
        case, _ = experience_services.case_submit(
            content=parse_case(copy.deepcopy(data)), actor=actor or reviewer, via=via
        )
        return case

    return make


@pytest.fixture
def approve(submit: Callable[..., Case], second_reviewer: User) -> Callable[..., Case]:
    """An approved case: submitted by the reviewer, checked and approved by the second reviewer."""

    def make(data: dict[str, Any]) -> Case:
        case = submit(data)
        approve_checked(case, actor=second_reviewer)
        case.refresh_from_db()
        return case

    return make
