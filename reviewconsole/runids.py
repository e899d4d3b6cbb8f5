"""Run ids: the caller's name for one agent investigation. Pure: no Django imports.

A run id is chosen by its caller (an agent, a held-out ticket set, the demo), so every door that
takes one (services, the API's bodies, ticket-set files) applies this one rule and gives this one
message; whose a run id is, is ``experience.runs.claims``' question.
"""

from __future__ import annotations

from typing import TypeGuard

from reviewconsole.errors import ValidationFailure

MAX_RUN_ID = 100
RUN_ID_INVALID = f"must be 1-{MAX_RUN_ID} characters without spaces"


def run_id_valid(value: object) -> TypeGuard[str]:
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_RUN_ID
        and not any(ch.isspace() for ch in value)
    )


def validate_run_id(value: object, *, field: str = "run_id") -> str:
    """``value`` unchanged, or a refusal naming ``field``."""
    if not run_id_valid(value):
        raise ValidationFailure(field, RUN_ID_INVALID)
    return value
