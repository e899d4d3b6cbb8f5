"""Stand-ins a benchmark puts in place of production functions, checked so they cannot rot.

A baseline arm sometimes switches off one part of the code it measures (no lessons recalled,
the retrieval index never answering) by replacing a function for the length of one call. Done
with a bare ``setattr``, that rots silently: when the function is renamed the bench crashes with
an ``AttributeError`` far from the cause, and when it moves to another module (and the caller
imports it from there) the stand-in is never called and the "baseline" measures the very code
it should leave out. A :class:`Seam` refuses both:

* made at start-up, it checks that the module still has a callable of that name, and says which
  production name a benchmark relies on when it does not;
* while in place, every call to the stand-in is checked against the original's signature (so a
  changed parameter list is reported, not absorbed by ``*args``) and counted;
* :meth:`Seam.require_called` fails the run when the arm ran with the stand-in in place and it
  was never called: the code no longer goes through that name.

Every bench script runs at a tiny scale in the test suite (tests/bench/test_bench_scripts.py),
so a seam that no longer holds fails the suite, with the message below.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any


class SeamBroken(SystemExit):
    """A benchmark's stand-in no longer fits the production code (exits the script)."""


class Seam:
    """``module.name`` replaced by ``stand_in`` while ``with seam.applied():`` runs."""

    def __init__(self, module: ModuleType, name: str, stand_in: Callable[..., Any]) -> None:
        original = getattr(module, name, None)
        if not callable(original):
            raise SeamBroken(
                f"bench seam {module.__name__}.{name} is gone: the benchmark replaces it to "
                "switch a part of the code off; point the seam at where that code lives now"
            )
        self.module = module
        self.name = name
        self.original: Callable[..., Any] = original
        self.signature = inspect.signature(original)
        self.stand_in = stand_in
        self.calls = 0
        self.applications = 0

    @property
    def where(self) -> str:
        return f"{self.module.__name__}.{self.name}"

    def _counted(self, *args: Any, **kwargs: Any) -> Any:
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise SeamBroken(
                f"bench seam {self.where} is called with arguments its stand-in was not "
                f"written for ({exc}): update the stand-in to {self.where}{self.signature}"
            ) from exc
        self.calls += 1
        return self.stand_in(*args, **kwargs)

    @contextmanager
    def applied(self) -> Iterator[None]:
        if getattr(self.module, self.name) is not self.original:
            raise SeamBroken(f"bench seam {self.where} is already replaced")
        setattr(self.module, self.name, self._counted)
        self.applications += 1
        try:
            yield
        finally:
            setattr(self.module, self.name, self.original)

    def require_called(self) -> None:
        """Fail when the stand-in was in place and never called: the code under measurement
        no longer goes through this name, so the arm would not switch anything off."""
        if self.applications and not self.calls:
            raise SeamBroken(
                f"bench seam {self.where} was in place for {self.applications} call(s) and "
                "never called: the measured code no longer goes through it, so the baseline "
                "switches nothing off; point the seam at the function the code calls now"
            )


@contextmanager
def all_applied(seams: list[Seam]) -> Iterator[None]:
    """Every seam of ``seams`` in place at once."""
    if not seams:
        yield
        return
    first, *rest = seams
    with first.applied(), all_applied(rest):
        yield
