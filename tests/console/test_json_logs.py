"""Structured logs as an option (issue 29, item 4): ``CONSOLE_LOG_FORMAT=json`` makes every log
line one JSON object a log collector reads without parsing text."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

from django.conf import settings

from reviewconsole.logformat import JsonFormatter

SCRIPT = """
import logging, django
django.setup()
logging.getLogger("console.check").warning("queue %s is %d deep", "default", 7)
try:
    1 / 0
except ZeroDivisionError:
    logging.getLogger("console.check").exception("division failed")
"""


def run_with(log_format: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CONSOLE_LOG_FORMAT": log_format,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "CONSOLE_EMBEDDER": "off",
    }
    return subprocess.run(  # noqa: S603 - the test's own interpreter and script
        [sys.executable, "-c", SCRIPT],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_json_logs_are_one_object_a_line_with_level_logger_time_and_traceback() -> None:
    done = run_with("json")
    assert done.returncode == 0, done.stderr
    first, second = (json.loads(line) for line in done.stderr.strip().splitlines()[:2])
    assert first["message"] == "queue default is 7 deep"
    assert first["level"] == "WARNING"
    assert first["logger"] == "console.check"
    assert first["time"].endswith("+00:00")
    assert isinstance(first["process"], int)
    assert "exception" not in first
    assert second["level"] == "ERROR"
    assert "ZeroDivisionError" in second["exception"]
    # The traceback is inside the object: every line of the output is one JSON object.
    assert len(done.stderr.strip().splitlines()) == 2


def test_text_logs_stay_the_default_and_an_unknown_format_is_named() -> None:
    done = run_with("text")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == "queue default is 7 deep"
    refused = run_with("xml")
    assert refused.returncode != 0
    assert "CONSOLE_LOG_FORMAT" in refused.stderr


def test_extras_are_kept_and_the_request_object_is_not() -> None:
    record = logging.LogRecord(
        "django.request", logging.WARNING, __file__, 1, "Not Found", None, None
    )
    record.status_code = 404
    record.request = object()
    entry = json.loads(JsonFormatter().format(record))
    assert entry["status_code"] == 404
    assert "request" not in entry
