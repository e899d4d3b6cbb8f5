"""``tests.helpers.clock_frozen(at)``: how a test moves the clock's seam, always restored.

Production code never sets the clock (``test_consolidation_homes``); only tests move it, through
this helper or the ``frozen_clock`` fixture.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reviewconsole import clock
from tests.helpers import clock_frozen

AT = datetime(2026, 9, 18, 6, 30, tzinfo=UTC)
LATER = AT + timedelta(minutes=15)


def test_frozen_pins_now_inside_the_block_and_restores_it_after() -> None:
    before = clock.now
    with clock_frozen(AT):
        assert clock.now() == AT
        assert clock.now() == AT
    assert clock.now is before


def test_frozen_restores_the_clock_when_the_block_raises() -> None:
    before = clock.now
    with pytest.raises(RuntimeError), clock_frozen(AT):
        raise RuntimeError("boom")
    assert clock.now is before


def test_frozen_blocks_nest_and_each_restores_its_own_previous_clock() -> None:
    before = clock.now
    with clock_frozen(AT):
        with clock_frozen(LATER):
            assert clock.now() == LATER
        assert clock.now() == AT
    assert clock.now is before


def test_frozen_restores_a_clock_a_test_had_pinned(frozen_clock: Any) -> None:
    pinned = frozen_clock(LATER)
    with clock_frozen(AT):
        assert clock.now() == AT
    assert clock.now is pinned
    assert clock.now() == LATER


def test_the_unfrozen_clock_is_the_real_time() -> None:
    assert abs(clock.now() - datetime.now(UTC)) < timedelta(minutes=1)


def test_the_seam_offers_no_way_to_set_it() -> None:
    own = [
        name
        for name, value in vars(clock).items()
        if callable(value) and getattr(value, "__module__", None) == clock.__name__
    ]
    assert own == ["now"]
