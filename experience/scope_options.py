"""The scope values the user may see, for forms to offer: documents' and cases' (two queries)."""

from __future__ import annotations

from typing import Any

from experience.domain import SCOPE_FIELDS
from experience.models import Case
from knowledge.scope_options import MAX_VALUES, document_scope_values
from reviewconsole.tenancy import visible


def scope_values(user: Any) -> dict[str, set[str]]:
    values: dict[str, set[str]] = {name: set() for name in SCOPE_FIELDS}
    values.update(document_scope_values(user))
    rows = (
        visible(Case.objects.all(), user)
        .values_list(*SCOPE_FIELDS)
        .distinct()
        .order_by(*SCOPE_FIELDS)[:MAX_VALUES]
    )
    for row in rows:
        for name, value in zip(SCOPE_FIELDS, row, strict=True):
            values[name].add(value)
    return values
