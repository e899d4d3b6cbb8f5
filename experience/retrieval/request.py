"""The opening and the record every read of experience by query shares (recall, the context block).

``read_request_open`` checks a request before anything is read: the permission, the query, the
caller's size (recall's ``limit``, the block's ``budget``), the instant, the run id, the scope
values given, then, when the scope is complete, the scope's tenant. A request with scope fields
missing comes back with ``missing`` set: the caller answers its fallback, and nothing is
recorded. ``read_request_record`` records what the read returned, claiming the run id for the
caller (also when nothing was found, so a refusal never depends on what the scope holds) and one
``Reference`` per item, in one transaction, at the instant the request was opened with.

Refusals name the field as the API's body does; the checks run in the order listed above, so a
request wrong in several ways is refused for the first of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction

from experience.core import domain
from experience.core.models import ItemType
from experience.index.postings import query_parsed
from experience.runs.claims import run_claim
from experience.runs.records import references_record
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.permissions import USE_EXPERIENCE, require, require_scope
from reviewconsole.runids import validate_run_id
from reviewconsole.scopes import SCOPE_FIELDS
from reviewconsole.timeparse import aware_required
from reviewconsole.writelock import write_retried
from textsearch.domain import ParsedQuery

if TYPE_CHECKING:
    from django.contrib.auth.models import User

MAX_QUERY = 2_000
QUERY_REQUIRED = "must be a non-empty string"
QUERY_TOO_LONG = f"must be at most {MAX_QUERY} characters"


@dataclass(frozen=True)
class Size:
    """How much a read may return, in the caller's own unit: an integer in ``[low, high]``,
    refused naming ``field`` with ``message``."""

    field: str
    value: object
    low: int
    high: int
    message: str

    def checked(self) -> int:
        value = self.value
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationFailure(self.field, self.message)
        if not self.low <= value <= self.high:
            raise ValidationFailure(self.field, self.message)
        return value


@dataclass(frozen=True)
class ReadRequest:
    """A checked read: ``scope`` is exact (every field stripped) unless ``missing`` names the
    fields the caller left out, in which case it is empty."""

    actor: User
    query: str
    size: int
    now: datetime
    run_id: str
    scope: Mapping[str, str]
    missing: tuple[str, ...]
    at: datetime
    # The query parsed once (raw and expanded tokens) when the scope is complete: the read, the
    # ranking and the answer's order all use it.
    parsed: ParsedQuery | None = None

    @property
    def complete(self) -> bool:
        return not self.missing


def query_checked(query: object) -> str:
    if not isinstance(query, str) or not query.strip():
        raise ValidationFailure("query", QUERY_REQUIRED)
    if len(query) > MAX_QUERY:
        raise ValidationFailure("query", QUERY_TOO_LONG)
    return query


def read_request_open(
    *,
    actor: User,
    query: object,
    scope: Mapping[str, str | None],
    now: datetime,
    run_id: object,
    size: Size,
    refused: str,
    at: datetime | None = None,
) -> ReadRequest:
    """The checked request, or the refusal of the first check it fails (``refused`` is the
    caller's message for a missing permission or a tenant the actor may not use).

    ``now`` is the instant the memory is read as of (a replay's ticket time, say); ``at`` is
    when the read happens, which its record carries (the clock, read once, when not given)."""
    require(actor, USE_EXPERIENCE, message=refused)
    checked_query = query_checked(query)
    checked_size = size.checked()
    aware_required(now, field="now")
    checked_run_id = validate_run_id(run_id)
    domain.given_scope_checked(scope)
    missing = tuple(domain.missing_scope(scope))
    exact: dict[str, str] = {}
    if not missing:
        exact = {name: str(scope[name]).strip() for name in SCOPE_FIELDS}
        # The tenant is checked here whoever calls (the API, MCP, a command, the console): the
        # permission was checked first, above, so only the tenant's use and existence remain.
        require_scope(actor, None, exact["tenant"], message=refused)
    return ReadRequest(
        actor=actor,
        query=checked_query,
        size=checked_size,
        now=now,
        run_id=checked_run_id,
        scope=exact,
        missing=missing,
        at=at if at is not None else clock.now(),
        parsed=query_parsed(checked_query) if not missing else None,
    )


@write_retried
def read_request_record(
    request: ReadRequest, items: Iterable[tuple[str, ItemType]], *, in_block: bool = False
) -> None:
    """Claim the request's run id for its actor and record one read per ``(id, kind)``
    (``in_block``: read into a context block)."""
    if not request.complete:
        raise ValueError("a request with scope fields missing reads nothing and records nothing")
    read = list(items)
    with transaction.atomic():
        claim = run_claim(
            run_id=request.run_id,
            actor=request.actor,
            tenant=request.scope["tenant"],
            at=request.at,
        )
        if read:
            references_record(run_id=claim.run_id, items=read, at=request.at, in_block=in_block)
