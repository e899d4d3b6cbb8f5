"""Parsing of timezone-aware datetimes. Naive values are refused, never read in a local zone."""

from __future__ import annotations

from datetime import UTC, datetime

from reviewconsole.errors import ValidationFailure

NAIVE_DATETIME = "must include a timezone offset (e.g. 2026-09-18T14:00:00+08:00)"
NOT_A_DATETIME = "is not an ISO 8601 datetime"
OUT_OF_RANGE = "is outside the range of representable instants"


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
    if parsed.tzinfo is None or parsed.tzinfo.utcoffset(parsed) is None:
        raise ValidationFailure(field, NAIVE_DATETIME)
    # The same instant in UTC: ISO 8601 allows offsets (up to ±23:59) that PostgreSQL refuses.
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        raise ValidationFailure(field, OUT_OF_RANGE) from None


def parse_optional_aware_datetime(value: object, *, field: str) -> datetime | None:
    if value is None:
        return None
    return parse_aware_datetime(value, field=field)


def to_utc_iso(value: datetime | None) -> str | None:
    """The canonical text of an instant: UTC, ISO 8601, ``Z`` suffix."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
