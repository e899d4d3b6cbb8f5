"""The scope values the user may see, for forms to offer: documents' and cases' (two queries)."""

from __future__ import annotations

from typing import Any

from experience.cases.models import Case
from knowledge.scope_options import distinct_values, document_scope_values
from reviewconsole.scopes import SCOPE_FIELDS
from reviewconsole.tenancy import visible


def scope_values(user: Any) -> dict[str, set[str]]:
    values = distinct_values(visible(Case.objects.all(), user), SCOPE_FIELDS)
    for name, used in document_scope_values(user).items():
        values[name] |= used
    return values
