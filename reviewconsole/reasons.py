"""The reason a decision records: one cap for the console, the commands and the services.

Pure: no Django imports. Every audited decision stores its reason in the audit event
(``reviewconsole.audit.event_record`` refuses a longer one, so no path stores more); forms and
the reason fields of the pages use the same cap.
"""

from __future__ import annotations

from reviewconsole.errors import ValidationFailure

MAX_REASON = 2_000
REASON_TOO_LONG = f"must be at most {MAX_REASON} characters"
REASON_REQUIRED = "a reason is required"


def reason_clipped(text: str) -> str:
    """The start of ``text`` that fits the cap: for an account a system writes of itself (a
    run's or an investigation's reason, a failure's error), kept whole elsewhere or not at all,
    never refused for its length."""
    return text[:MAX_REASON]


def reason_within_cap(reason: str, *, field: str = "reason") -> str:
    """``reason`` unchanged, or a refusal naming ``field`` when it is longer than the cap."""
    if len(reason) > MAX_REASON:
        raise ValidationFailure(field, REASON_TOO_LONG)
    return reason
