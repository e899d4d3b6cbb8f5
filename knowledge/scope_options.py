"""The scope values documents use, for forms to offer (datalists): one query, tenancy applied."""

from __future__ import annotations

from typing import Any

from knowledge.models import DocumentStore
from reviewconsole.tenancy import visible

DOCUMENT_SCOPE = ("tenant", "brand", "campaign", "store")
MAX_VALUES = 500  # distinct scopes read; a datalist is a suggestion, not an index


def document_scope_values(user: Any) -> dict[str, set[str]]:
    values: dict[str, set[str]] = {name: set() for name in DOCUMENT_SCOPE}
    rows = (
        visible(DocumentStore.objects.all(), user)
        .values_list(*DOCUMENT_SCOPE)
        .distinct()
        .order_by(*DOCUMENT_SCOPE)[:MAX_VALUES]
    )
    for row in rows:
        for name, value in zip(DOCUMENT_SCOPE, row, strict=True):
            values[name].add(value)
    return values
