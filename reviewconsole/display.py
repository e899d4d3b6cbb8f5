"""Showing stored datetimes in local time without ever failing a page.

Input is bounded (``reviewconsole.timeparse.check_bounds``), but a row stored before the bound
existed, or written around the services, may hold an instant whose local time Python cannot
represent (9999-12-31T23:59:59Z is already year 10000 in Shanghai). Such a value is shown in UTC
instead: Django's template and admin display leave a datetime alone when it says
``convert_to_local_time = False``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from django.apps import apps
from django.db import models
from django.db.models.signals import post_init
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


def datetime_attnames(model: type[models.Model]) -> tuple[str, ...]:
    return tuple(
        field.attname
        for field in model._meta.concrete_fields
        if isinstance(field, models.DateTimeField)
    )


def unshowable_marker(attnames: tuple[str, ...]) -> Callable[..., None]:
    """A ``post_init`` receiver for one model: loaded datetimes without a local time become
    ``ShownInUtc``, so list pages, detail pages and the admin show them instead of failing.

    It runs for every row loaded, so it only looks closer at years 1 and 9999: every other
    instant is more than a day from the ends of ``datetime``'s range and has a local time.
    """

    def mark(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
        state = instance.__dict__
        for name in attnames:
            value = state.get(name)
            if isinstance(value, datetime) and value.year in (1, 9999):
                state[name] = showable(value)

    return mark


def connect_unshowable_markers() -> None:
    """Connect a marker to every model that stores datetimes (the others pay nothing)."""
    for model in apps.get_models():
        attnames = datetime_attnames(model)
        if attnames:
            post_init.connect(
                unshowable_marker(attnames),
                sender=model,
                weak=False,
                dispatch_uid=f"reviewconsole.unshowable.{model._meta.label_lower}",
            )


def local_text(value: object) -> str:
    """An ISO time held in stored content (``2026-09-01T00:00:00+00:00``) as the page shows
    times: in the active zone, named by its abbreviation at that instant (CEST in a Berlin
    September, CET in its January). Anything else, or a time without a local form, as it is."""
    if not isinstance(value, str):
        return "—" if value is None else str(value)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    if timezone.is_naive(parsed):
        return value
    try:
        local = timezone.localtime(parsed)
    except OverflowError:
        return value
    return local.strftime("%Y-%m-%d %H:%M:%S %Z")


ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")


def local_times_in(text: str) -> str:
    """``text`` with each ISO time in it shown as ``local_text`` shows it."""
    return ISO_TIME.sub(lambda match: local_text(match.group(0)), text)
