"""What curation's writes check before they act: the refusal messages and the reason rule."""

from __future__ import annotations

from reviewconsole.errors import ValidationFailure
from reviewconsole.reasons import REASON_REQUIRED

IMPORT_REFUSED = "importing threads needs the operator or reviewer role"
BUILD_REFUSED = "building candidates needs the operator or reviewer role"
REVIEW_REFUSED = "this decision needs the reviewer role"
ADOPT_REFUSED = "submitting skills needs the operator or reviewer role"


def reason_given(reason: str) -> str:
    """The reason a decision records, stripped; a decision without one is refused."""
    text = reason.strip()
    if not text:
        raise ValidationFailure("reason", REASON_REQUIRED)
    return text
