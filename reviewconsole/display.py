"""Showing stored datetimes in local time without ever failing a page.

Input is bounded (``reviewconsole.timeparse.check_bounds``), but a row stored before the bound
existed, or written around the services, may hold an instant whose local time Python cannot
represent (9999-12-31T23:59:59Z is already year 10000 in Shanghai). Such a value is shown in UTC
instead: Django's template and admin display leave a datetime alone when it says
``convert_to_local_time = False``.
"""

from __future__ import annotations

from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from django.db import models
from django.utils import timezone


class ShownInUtc(datetime):
    """The same instant, shown as UTC wherever Django would convert it to local time."""

    convert_to_local_time = False


def showable(value: Any) -> Any:
    """``value`` itself, or for an aware datetime without a local time, its UTC ``ShownInUtc``."""
    if not isinstance(value, datetime) or isinstance(value, ShownInUtc):
        return value
    if timezone.is_naive(value):
        return value
    try:
        timezone.localtime(value)
        return value
    except OverflowError:
        pass
    # When not even UTC can hold it, it keeps the offset it was written with.
    with suppress(OverflowError):
        value = value.astimezone(UTC)
    return ShownInUtc.combine(value.date(), value.timetz())


def mark_unshowable(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    """A ``post_init`` receiver: loaded datetimes without a local time become ``ShownInUtc``,
    so list pages, detail pages and the admin show them instead of failing."""
    for field in instance._meta.concrete_fields:
        if isinstance(field, models.DateTimeField):
            value = instance.__dict__.get(field.attname)
            if value is not None:
                instance.__dict__[field.attname] = showable(value)
