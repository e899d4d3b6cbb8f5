"""Errors shared by the pure domain code and the Django layers.

A ``ValidationFailure`` always names the field (or JSON path) that is wrong so that
commands, the API and forms can point the user at it.
"""

from __future__ import annotations


class ValidationFailure(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message

    def at(self, prefix: str) -> ValidationFailure:
        """The same failure with its field nested under ``prefix`` (a JSON path)."""
        if not prefix:
            return self
        field = (
            f"{prefix}.{self.field}"
            if self.field and not self.field.startswith("[")
            else (f"{prefix}{self.field}")
        )
        return ValidationFailure(field, self.message)


class ImmutableContentError(RuntimeError):
    """A write that would change hashed content after it was stored: only lifecycle columns may
    change (the experience items' and the knowledge documents' rows alike)."""


class PermissionRefused(PermissionError):
    def __init__(self, message: str, *, unmet: str = "not_permitted") -> None:
        super().__init__(message)
        self.message = message
        self.unmet = unmet


class UnknownId(ValidationFailure):
    """An id that names nothing the caller may use: an id nobody has, or another tenant's,
    answered alike. Commands report it as any bad value of ``field``; the API answers 404 and MCP
    ``not_found``, as for every unknown id (docs/contracts.md)."""


class AlreadyTaken(ValidationFailure):
    """A caller-chosen id that already names something of the caller's (a run id that already
    has an investigation). Commands report it as any bad value of ``field``; the API answers 409
    and MCP ``conflict`` (docs/contracts.md)."""
