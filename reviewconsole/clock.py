"""The clock behind a seam, so tests can move time without patching ``datetime``."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone


def now() -> datetime:
    return timezone.now()
