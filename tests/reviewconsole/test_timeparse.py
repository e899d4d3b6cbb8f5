"""Datetimes are aware, parsed without a local zone, and normalised to UTC."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reviewconsole.errors import ValidationFailure
from reviewconsole.timeparse import NAIVE_DATETIME, OUT_OF_RANGE, parse_aware_datetime


def test_offsets_become_the_same_instant_in_utc() -> None:
    parsed = parse_aware_datetime("2026-09-18T14:00:00+08:00", field="at")
    assert parsed == datetime(2026, 9, 18, 6, tzinfo=UTC) and parsed.utcoffset() is not None
    assert parse_aware_datetime("2026-09-18T14:00:00-23:59", field="at").tzinfo == UTC


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2026-09-18T14:00:00", NAIVE_DATETIME),
        ("0001-01-01T00:00:00+08:00", OUT_OF_RANGE),
        ("9999-12-31T23:59:59-08:00", OUT_OF_RANGE),
    ],
)
def test_refusals_name_the_field(text: str, message: str) -> None:
    with pytest.raises(ValidationFailure) as failure:
        parse_aware_datetime(text, field="valid_from")
    assert (failure.value.field, failure.value.message) == ("valid_from", message)
