"""The scope values documents use, for forms to offer (datalists): one query, tenancy applied."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from knowledge.models import DocumentStore
from reviewconsole.tenancy import visible

DOCUMENT_SCOPE = ("tenant", "brand", "campaign", "store")
MAX_VALUES = 500  # distinct scopes read; a datalist is a suggestion, not an index


def distinct_values(rows: Any, fields: Sequence[str]) -> dict[str, set[str]]:
    """The values each of ``fields`` takes among ``rows`` (a queryset, tenancy already applied),
    from at most ``MAX_VALUES`` distinct combinations: one query."""
    values: dict[str, set[str]] = {name: set() for name in fields}
    for row in rows.values_list(*fields).distinct().order_by(*fields)[:MAX_VALUES]:
        for name, value in zip(fields, row, strict=True):
            values[name].add(value)
    return values


def document_scope_values(user: Any) -> dict[str, set[str]]:
    return distinct_values(visible(DocumentStore.objects.all(), user), DOCUMENT_SCOPE)
