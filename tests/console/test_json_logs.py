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


# How Django's request handler logs a refused request (django.core.handlers.exception), and a
# server error, under the console's logging settings with DEBUG on, as `make run` serves.
REFUSED_AND_FAILED = """
import django
django.setup()
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.test import RequestFactory
from django.utils.log import log_response

request = RequestFactory().get("/queue/")
try:
    raise PermissionDenied
except PermissionDenied as error:
    log_response(
        "Forbidden (Permission denied): %s", request.path,
        response=HttpResponse(status=403), request=request, exception=error,
    )
try:
    1 / 0
except ZeroDivisionError as error:
    log_response(
        "Internal Server Error: %s", request.path,
        response=HttpResponse(status=500), request=request, exception=error,
    )
"""


def run_script(script: str, log_format: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CONSOLE_LOG_FORMAT": log_format,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "CONSOLE_EMBEDDER": "off",
        "PYTHONPATH": str(settings.BASE_DIR),
    }
    return subprocess.run(  # noqa: S603 - the test's own interpreter and script
        [sys.executable, "-c", script],
        cwd=settings.BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_refused_request_is_one_log_line_and_a_server_error_keeps_its_traceback() -> None:
    done = run_script(REFUSED_AND_FAILED, "text")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0] == "Forbidden (Permission denied): /queue/"
    assert lines.count("Forbidden (Permission denied): /queue/") == 1  # not printed twice
    assert lines[1] == "Internal Server Error: /queue/"
    assert "PermissionDenied" not in done.stderr
    assert "ZeroDivisionError" in done.stderr

    as_json = [
        json.loads(line) for line in run_script(REFUSED_AND_FAILED, "json").stderr.splitlines()
    ]
    assert [entry["status_code"] for entry in as_json] == [403, 500]
    assert "exception" not in as_json[0]
    assert "ZeroDivisionError" in as_json[1]["exception"]
