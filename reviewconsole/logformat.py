"""Log lines: one JSON object per line for log collectors (``CONSOLE_LOG_FORMAT=json``), and a
request refused with a client error logged as one line, without the traceback Django attaches.

Each line: ``time`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``, ``message``,
``process`` (the process id: which instance or worker wrote it), ``exception`` (the traceback,
when there is one) and any ``extra`` a call passed whose value JSON can carry (Django's request
logs add ``status_code``). The request object Django attaches is left out: it is not data, and
it holds cookies and headers.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "request",
    "taskName",
}


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        for name, value in vars(record).items():
            if name not in _STANDARD and name not in entry and _plain(value):
                entry[name] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False)


class ClientErrorsOneLine(logging.Filter):
    """A request answered with a 4xx (Django logs a ``PermissionDenied`` as "Forbidden
    (Permission denied): /path" with the exception's traceback) is logged as its one line: a
    refusal is the console working as meant, not a failure to read a traceback for. Server
    errors (5xx) keep theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
