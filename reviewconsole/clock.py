"""The clock behind a seam, so tests can move time without patching ``datetime``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from django.utils import timezone


def now() -> datetime:
    return timezone.now()


@contextmanager
def frozen(at: datetime) -> Iterator[None]:
    """``now()`` returns ``at`` inside the block; the previous clock is back after it.

    Like the seam itself the clock is one per process (not per thread), and the previous clock
    is restored also when the block raises; blocks nest.
    """
    global now
    previous = now

    def frozen_now() -> datetime:
        return at

    now = frozen_now
    try:
        yield
    finally:
        now = previous
