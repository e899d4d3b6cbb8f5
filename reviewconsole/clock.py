"""The clock behind a seam, so tests can move time without patching ``datetime``.

Production code only reads it: a write takes ``now()`` once, at its edge, and hands that moment
to everything it writes (docs/architecture.md, Time). Only tests set it (``tests.helpers.
clock_frozen``, the ``frozen_clock`` fixture).
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone


def now() -> datetime:
    return timezone.now()
