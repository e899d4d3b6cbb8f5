"""Querysets compiled once and run many times with new values.

Building a queryset through the ORM (filters, ``Exists``, correlated subqueries) can cost several
times what the database takes to answer it, and a hot read pays that on every call. A
:class:`Statement` builds its queryset once per database and key, with a sentinel in place of
each value, finds the sentinels among the compiled parameters, and binds each call's values in
their place.

A list parameter (``field__in=``) is compiled once per size bucket (1, 2, 4, … up to
:data:`MAX_LIST`), the last value repeated to fill its bucket, which changes nothing in an
``IN``; a longer list is read in chunks of :data:`MAX_LIST`, so a statement with a list
parameter must return rows that do not depend on each other (no aggregate over the list).

On PostgreSQL a statement every request runs can also be **prepared** (:func:`prepared_cursor`,
``Statement(..., prepared=True)``): its parameters bound by the server and its plan made once per
connection, where Django's own cursors send each statement as a new text with the values quoted
in, which the server parses and plans again every time (for the access statement, five times the
server's CPU of the prepared one).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from django.db import connection
from django.db.backends.utils import CursorDebugWrapper
from django.db.models import QuerySet

TEXT = "text"
DATETIME = "datetime"
INTEGER = "integer"
# Integers no primary key or count takes, inside every database's 32-bit integer column (a
# lookup out of a column's range is compiled as matching nothing, losing the parameter).
_SENTINEL_INTEGER = -2_147_483_000
MAX_LIST = 512
_SENTINEL_EPOCH = datetime(1901, 2, 3, 4, 5, 6, tzinfo=UTC)


@dataclass(frozen=True)
class Param:
    """A value a statement is run with: a text, an integer or a datetime, or a list of texts."""

    name: str
    kind: str = TEXT
    many: bool = False


class Statement:
    """``build(**sentinels)`` is the queryset; :meth:`rows` runs it with the values given.

    ``build`` must only place each sentinel where the value goes (a filter's right-hand side),
    never compute with it. ``key`` (for :meth:`rows`) names anything else the queryset depends
    on, such as an installed expression.
    """

    def __init__(
        self,
        build: Callable[..., QuerySet[Any]],
        params: Sequence[Param],
        *,
        prepared: bool = False,
    ) -> None:
        self.build = build
        self.params = tuple(params)
        self.prepared = prepared
        if sum(1 for p in self.params if p.many) > 1:
            raise ValueError("a statement takes at most one list parameter")
        self._compiled: dict[tuple[Any, ...], tuple[str, tuple[_Slot, ...]]] = {}

    def _sentinels(self, size: int) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for index, param in enumerate(self.params):
            if param.kind == DATETIME:
                values[param.name] = _SENTINEL_EPOCH + timedelta(seconds=index)
            elif param.kind == INTEGER:
                values[param.name] = _SENTINEL_INTEGER - index
            elif param.many:
                values[param.name] = [f"\x00{param.name}:{i}" for i in range(size)]
            else:
                values[param.name] = f"\x00{param.name}"
        return values

    def _statement(self, key: Hashable, size: int) -> tuple[str, tuple[_Slot, ...]]:
        cache_key = (connection.vendor, key, size)
        compiled = self._compiled.get(cache_key)
        if compiled is not None:
            return compiled
        sentinels = self._sentinels(size)
        sql, params = self.build(**sentinels).query.sql_with_params()
        places: dict[Any, _Slot] = {}
        for param in self.params:
            value = sentinels[param.name]
            if param.kind == DATETIME:
                adapted = connection.ops.adapt_datetimefield_value(value)
                places[adapted] = _Slot(param.name)
            elif param.many:
                places.update({item: _Slot(param.name, i) for i, item in enumerate(value)})
            else:
                places[value] = _Slot(param.name)
        slots = tuple(
            places.get(value, _Slot("", literal=value))
            if isinstance(value, Hashable)
            else _Slot("", literal=value)
            for value in params
        )
        lost = {place.name for place in places.values()} - {slot.name for slot in slots}
        if lost:
            raise ValueError(f"the compiled statement lost its parameters: {sorted(lost)}")
        compiled = self._compiled[cache_key] = (sql, slots)
        return compiled

    def rows(self, key: Hashable = None, **values: Any) -> list[tuple[Any, ...]]:
        """The rows for these values (a list parameter: each distinct item once)."""
        adapted: dict[str, Any] = {
            p.name: connection.ops.adapt_datetimefield_value(values[p.name])
            if p.kind == DATETIME
            else values[p.name]
            for p in self.params
        }
        many = next((p.name for p in self.params if p.many), None)
        if many is None:
            return self._run(key, 1, adapted)
        items = list(dict.fromkeys(adapted[many]))
        rows: list[tuple[Any, ...]] = []
        for start in range(0, len(items), MAX_LIST):
            chunk = items[start : start + MAX_LIST]
            size = 1 << (len(chunk) - 1).bit_length()
            filled = chunk + chunk[-1:] * (size - len(chunk))
            rows += self._run(key, size, {**adapted, many: filled})
        return rows

    def _run(self, key: Hashable, size: int, values: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        sql, slots = self._statement(key, size)
        params = [slot.value(values) for slot in slots]
        with prepared_cursor() if self.prepared else connection.cursor() as cursor:
            cursor.execute(sql, params)
            return list(cursor.fetchall())


class _LoggedAsWritten(CursorDebugWrapper):
    """Django's logging cursor (``DEBUG``, the queries tests count), logging a prepared
    statement as written, with its placeholders: psycopg keeps no text for a statement it runs
    prepared, where Django reads the text it logs."""

    def debug_sql(
        self,
        sql: Any = None,
        params: Any = None,
        use_last_executed_query: bool = False,
        many: bool = False,
    ) -> Any:
        return super().debug_sql(sql, params, use_last_executed_query=False, many=many)


@contextmanager
def prepared_cursor() -> Iterator[Any]:
    """A cursor whose statements PostgreSQL prepares once per connection, for the few that every
    request runs: the parameters are bound by the server (``%s`` placeholders as usual), and a
    statement is prepared at its first run on a connection and reused while the connection lives
    (psycopg keeps the last 100 per connection). It is wrapped as Django wraps its own cursors,
    so errors, execute wrappers and the queries tests count are the same. Django's cursors keep
    binding client-side and preparing nothing (its default, which poolers in transaction mode
    need; this deployment connects directly). Elsewhere (SQLite) Django's own cursor.

    Only a statement whose result columns are named (no ``*``) belongs here: a migration that
    changed a column's type under a prepared statement would fail it until the connection is
    replaced."""
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            yield cursor
        return
    connection.ensure_connection()
    connection.validate_thread_sharing()
    raw = connection.connection
    # Django turns preparation off per connection (None); 0 prepares what a server-binding
    # cursor runs at its first run. Only such cursors prepare, so only this function's do.
    if raw.prepare_threshold != 0:
        raw.prepare_threshold = 0
    bound: Any = psycopg.Cursor(raw)  # (the stubs type the wrapped cursor as a wrapper)
    cursor = (
        _LoggedAsWritten(bound, connection)
        if connection.queries_logged
        else connection.make_cursor(bound)
    )
    try:
        yield cursor
    finally:
        cursor.close()


@dataclass(frozen=True)
class _Slot:
    """One compiled parameter: a value given by name (``index`` into a list one), or a literal
    the queryset itself holds (``name`` empty)."""

    name: str
    index: int | None = None
    literal: Any = None

    def value(self, values: Mapping[str, Any]) -> Any:
        if not self.name:
            return self.literal
        given = values[self.name]
        return given if self.index is None else given[self.index]
