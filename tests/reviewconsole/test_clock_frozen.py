"""``clock.frozen(at)``: the one way production code pins the clock, always restored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reviewconsole import clock

AT = datetime(2026, 9, 18, 6, 30, tzinfo=UTC)
LATER = AT + timedelta(minutes=15)


def test_frozen_pins_now_inside_the_block_and_restores_it_after() -> None:
    before = clock.now
    with clock.frozen(AT):
        assert clock.now() == AT
        assert clock.now() == AT
    assert clock.now is before


def test_frozen_restores_the_clock_when_the_block_raises() -> None:
    before = clock.now
    with pytest.raises(RuntimeError), clock.frozen(AT):
        raise RuntimeError("boom")
    assert clock.now is before


def test_frozen_blocks_nest_and_each_restores_its_own_previous_clock() -> None:
    before = clock.now
    with clock.frozen(AT):
        with clock.frozen(LATER):
            assert clock.now() == LATER
        assert clock.now() == AT
    assert clock.now is before


def test_frozen_restores_a_clock_a_test_had_pinned(frozen_clock: Any) -> None:
    pinned = frozen_clock(LATER)
    with clock.frozen(AT):
        assert clock.now() == AT
    assert clock.now is pinned
    assert clock.now() == LATER


def test_the_unfrozen_clock_is_the_real_time() -> None:
    assert abs(clock.now() - datetime.now(UTC)) < timedelta(minutes=1)
