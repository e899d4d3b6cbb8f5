"""bench/seams.py: a benchmark's stand-in refuses to rot silently. It names the production
function that is gone, the call its stand-in was not written for, and the stand-in that was in
place but never called (the measured code no longer goes through that name)."""

from __future__ import annotations

import types

import pytest

from bench.seams import Seam, SeamBroken, all_applied


def _module() -> types.ModuleType:
    module = types.ModuleType("measured")

    def scored(items: list[int], now: int, *, explain: bool = True) -> list[int]:
        return [item * 2 for item in items]

    def through(items: list[int]) -> list[int]:
        return module.scored(items, 0)  # type: ignore[no-any-return]

    module.scored = scored  # type: ignore[attr-defined]
    module.through = through  # type: ignore[attr-defined]
    return module


def test_the_stand_in_answers_while_applied_and_the_original_after() -> None:
    module = _module()
    seam = Seam(module, "scored", lambda items, *_, **__: items)
    with seam.applied():
        assert module.through([1, 2]) == [1, 2]
    assert module.through([1, 2]) == [2, 4]
    assert seam.calls == 1
    seam.require_called()


def test_a_name_that_is_gone_is_refused_at_start_up_naming_it() -> None:
    with pytest.raises(SeamBroken, match=r"measured\.with_confidence is gone"):
        Seam(_module(), "with_confidence", lambda *_: None)


def test_a_stand_in_never_called_fails_the_run() -> None:
    module = _module()
    seam = Seam(module, "scored", lambda *_, **__: [])
    other = Seam(module, "through", lambda items: items)
    with all_applied([seam, other]):
        assert module.through([3]) == [3]  # the stand-in of ``through`` never calls ``scored``
    other.require_called()
    with pytest.raises(
        SeamBroken, match=r"measured\.scored was in place for 1 call\(s\) and never called"
    ):
        seam.require_called()


def test_a_call_the_original_would_refuse_is_reported() -> None:
    module = _module()
    seam = Seam(module, "scored", lambda *_, **__: [])
    with seam.applied(), pytest.raises(SeamBroken, match=r"measured\.scored is called with"):
        module.scored([1], 0, 1, 2)
    assert module.scored([1], 0) == [2]
