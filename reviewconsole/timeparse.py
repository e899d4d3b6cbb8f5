"""Parsing of timezone-aware datetimes. Naive values are refused, never read in a local zone.

Every datetime the product accepts (files, console forms, the API, MCP, command options) passes
``check_bounds``: one bound, refused naming the field, so no stored instant is one that a page
cannot show in local time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reviewconsole.errors import ValidationFailure

EARLIEST_YEAR = 1900
LATEST_YEAR = 2999
# No time zone is a whole day away from UTC, so an instant at least a day inside these years has
# its date in them wherever a page shows it, and every conversion stays far from the limits of
# Python's datetime (years 1-9999) that made such values crash pages before.
EARLIEST = datetime(EARLIEST_YEAR, 1, 1, tzinfo=UTC) + timedelta(days=1)
LATEST = datetime(LATEST_YEAR + 1, 1, 1, tzinfo=UTC) - timedelta(days=1, microseconds=1)

NAIVE_DATETIME = "must include a timezone offset (e.g. 2026-09-18T14:00:00+08:00)"
# A datetime handed to a service by code (not parsed from text) that carries no offset.
NOT_AWARE = "must be timezone-aware"
NOT_A_DATETIME = "is not an ISO 8601 datetime"
OUT_OF_RANGE = (
    f"must be between {EARLIEST:%Y-%m-%dT%H:%M:%S}Z and {LATEST:%Y-%m-%dT%H:%M:%S}Z "
    f"(dates in the years {EARLIEST_YEAR}-{LATEST_YEAR} in every time zone)"
)


def parse_aware_datetime(value: object, *, field: str) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and value.strip():
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValidationFailure(field, f"{value!r} {NOT_A_DATETIME}") from None
    else:
        raise ValidationFailure(field, NOT_A_DATETIME)
    # The same instant in UTC (ISO 8601 allows offsets, up to ±23:59, that PostgreSQL refuses),
    # within the one bound every datetime the product accepts shares.
    return check_bounds(parsed, field=field)


def is_aware(value: datetime) -> bool:
    return value.tzinfo is not None and value.tzinfo.utcoffset(value) is not None


def aware_required(value: datetime, *, field: str) -> datetime:
    """``value`` unchanged, or a refusal naming ``field`` when it is naive (the instants code
    passes to a service: a naive one is never read in a local zone)."""
    if not is_aware(value):
        raise ValidationFailure(field, NOT_AWARE)
    return value


def check_bounds(value: datetime, *, field: str) -> datetime:
    """``value`` as the same instant in UTC, refused (naming ``field``) outside the bound."""
    if not is_aware(value):
        raise ValidationFailure(field, NAIVE_DATETIME)
    try:
        instant = value.astimezone(UTC)
    except OverflowError:
        raise ValidationFailure(field, OUT_OF_RANGE) from None
    if not EARLIEST <= instant <= LATEST:
        raise ValidationFailure(field, OUT_OF_RANGE)
    return instant


def parse_optional_aware_datetime(value: object, *, field: str) -> datetime | None:
    if value is None:
        return None
    return parse_aware_datetime(value, field=field)


def to_utc_iso(value: datetime | None) -> str | None:
    """The canonical text of an instant: UTC, ISO 8601, ``Z`` suffix.

    An instant UTC cannot hold (0001-01-01T00:00+08:00) keeps its own offset, so that parsing
    the text again refuses it naming the field instead of failing here."""
    if value is None:
        return None
    try:
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    except OverflowError:
        return value.isoformat()
