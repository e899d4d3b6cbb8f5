"""Small checks shared by the JSON import formats. Pure: no Django imports.

Every failure names the JSON path of the offending value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from reviewconsole.errors import ValidationFailure

T = TypeVar("T")


def json_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def unknown_fields(
    obj: Mapping[str, Any], allowed: frozenset[str], path: str, message: str
) -> list[ValidationFailure]:
    """A failure for each key of ``obj`` (in sorted order) that ``allowed`` does not list."""
    return [
        ValidationFailure(json_path(path, str(name)), message)
        for name in sorted(set(obj) - allowed, key=str)
    ]


def reject_unknown_fields(
    obj: Mapping[str, Any], allowed: frozenset[str], path: str, message: str
) -> None:
    """Refuse the first (in sorted order) key of ``obj`` that ``allowed`` does not list."""
    unknown = unknown_fields(obj, allowed, path, message)
    if unknown:
        raise unknown[0]


class FieldChecks:
    """The field checks of one import item, run in the order its parse runs them.

    A parse uses ``FieldChecks()``: the first failure is raised, as it always was. ``every=True``
    keeps each failure in ``failures`` instead and goes on with the item's other fields, so one
    definition of each rule serves both the commands (first error) and the console (every
    error). A check whose fields already failed (missing, or refused) is not run again.
    """

    def __init__(self, *, every: bool = False) -> None:
        self.every = every
        self.failures: list[ValidationFailure] = []
        self._failed: set[str] = set()

    def fail(self, failure: ValidationFailure, *fields: str) -> None:
        """Raise ``failure``, or keep it and mark ``fields`` (default: its own) as failed."""
        if not self.every:
            raise failure
        self.failures.append(failure)
        self._failed.update(fields or (failure.field,))

    def failed(self, *fields: str) -> bool:
        return bool(self._failed.intersection(fields))

    def check(self, fields: str | tuple[str, ...], check: Callable[[], T]) -> T | None:
        """``check()``, which reads the top-level ``fields`` of the item; None when it failed
        (every failure kept) or when one of ``fields`` already failed."""
        names = (fields,) if isinstance(fields, str) else fields
        if self.failed(*names):
            return None
        try:
            return check()
        except ValidationFailure as failure:
            self.fail(failure, *names)
            return None

    def unknown(
        self, obj: Mapping[str, Any], allowed: frozenset[str], path: str, message: str
    ) -> None:
        for failure in unknown_fields(obj, allowed, path, message):
            self.fail(failure)

    def require(self, obj: Mapping[str, Any], names: tuple[str, ...], message: str) -> None:
        for name in names:
            if name not in obj:
                self.fail(ValidationFailure(name, message))


def every_failure(check_item: Callable[[FieldChecks], object]) -> list[ValidationFailure]:
    """Every failure ``check_item`` finds in one item: each field's, or the one refusal of the
    item as a whole (not an object, too deep) that stops it."""
    checks = FieldChecks(every=True)
    try:
        check_item(checks)
    except ValidationFailure as failure:
        return [*checks.failures, failure]
    return checks.failures


def bounded_text(value: object, path: str, limit: int, *, required: bool = True) -> str:
    """A stripped string of at most ``limit`` characters; "" for an absent optional value."""
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise ValidationFailure(path, "must be a string")
    text = value.strip()
    if required and not text:
        raise ValidationFailure(path, "must not be empty")
    if len(text) > limit:
        raise ValidationFailure(path, f"must be at most {limit} characters (got {len(text)})")
    return text
