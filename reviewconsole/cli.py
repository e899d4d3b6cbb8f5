"""The shared shape of management commands: ``--json`` output and refusals.

With ``--json`` stdout holds exactly one JSON object, also when the command refuses, the
arguments are wrong or something unexpected fails; refusals exit non-zero and name the field
that is wrong. Files and options are checked by the same rules as API bodies
(``reviewconsole.inputs``).
"""

from __future__ import annotations

import json
import logging
import re
import sys
from argparse import ArgumentParser
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewconsole import inputs
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.writelock import LOCKED_MESSAGE, is_locked

UNEXPECTED = "failed unexpectedly ({kind}); the details are in the log"

logger = logging.getLogger(__name__)


def arguments_text(arguments: Mapping[str, object]) -> str:
    """A tool call's arguments as people read them: ``query: 优惠券``, never a Python dict."""
    return ", ".join(f"{name}: {value}" for name, value in arguments.items())


class CommandRefused(Exception):
    """A refusal whose JSON payload is already known (e.g. unmet approval conditions)."""

    def __init__(self, message: str, payload: dict[str, Any]) -> None:
        super().__init__(message)
        self.payload = payload


class JsonCommand(BaseCommand):
    """Subclasses implement ``execute_json`` returning the JSON object, and ``render_text``."""

    # Options naming files or directories: any bytes the file system allows are accepted.
    path_options: frozenset[str] = frozenset({"file", "out", "output", "fixtures"})

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        self._option_names = {
            action.dest: (
                action.option_strings[0]
                if action.option_strings
                else str(action.metavar or action.dest)
            )
            for action in parser._actions
        }
        original_error = parser.error

        def error(message: str) -> NoReturn:
            if "--json" in sys.argv:
                sys.stdout.write(json.dumps({"ok": False, "error": message}) + "\n")
                sys.exit(2)
            original_error(message)
            raise AssertionError("unreachable")  # argparse's error() exits

        parser.error = error  # type: ignore[method-assign]
        return parser

    def add_arguments(self, parser: ArgumentParser) -> None:  # pragma: no cover - overridden
        pass

    def handle(self, *args: Any, **options: Any) -> None:
        as_json = bool(options.get("json"))
        try:
            self._check_options(options)
            result = self.execute_json(**options)
        except CommandRefused as refusal:
            self._emit(refusal.payload, as_json, text=str(refusal))
            raise CommandError(str(refusal)) from None
        except ValidationFailure as failure:
            payload = {"ok": False, "error": failure.message, "field": failure.field}
            self._emit(payload, as_json, text=str(failure))
            raise CommandError(str(failure)) from None
        except PermissionRefused as refusal:
            payload = {"ok": False, "error": refusal.message, "unmet": [refusal.unmet]}
            self._emit(payload, as_json, text=refusal.message)
            raise CommandError(refusal.message) from None
        except CommandError as error:
            self._emit({"ok": False, "error": str(error)}, as_json, text=str(error))
            raise
        except Exception as error:
            if is_locked(error):
                # The write lock stayed taken past the busy timeout: a condition, not a bug.
                self._emit({"ok": False, "error": LOCKED_MESSAGE}, as_json, text=LOCKED_MESSAGE)
                raise CommandError(LOCKED_MESSAGE) from error
            # A bug or an environment failure (database, disk); the service's transaction rolled
            # back. Without --json the traceback itself is the most useful report.
            if not as_json:
                raise
            logger.exception("%s failed unexpectedly", type(self).__module__)
            message = UNEXPECTED.format(kind=type(error).__name__)
            self._emit({"ok": False, "error": message}, as_json, text=message)
            raise CommandError(message) from error
        if as_json:
            self.stdout.write(_dumps(result))
        else:
            self.stdout.write(self.render_text(result))

    def _check_options(self, options: dict[str, Any]) -> None:
        """Refuse, naming the option, text that is not Unicode (undecodable command-line bytes)."""
        names = getattr(self, "_option_names", {})
        for dest, value in options.items():
            if dest in self.path_options or dest not in names:
                continue
            for text in value if isinstance(value, list | tuple) else [value]:
                if isinstance(text, str):
                    inputs.storable_text(text, field=names[dest])

    def _emit(self, payload: dict[str, Any], as_json: bool, *, text: str) -> None:
        if as_json:
            self.stdout.write(_dumps(payload))

    def execute_json(self, **options: Any) -> dict[str, Any]:
        raise NotImplementedError

    def render_text(self, result: dict[str, Any]) -> str:
        return json.dumps(result, ensure_ascii=False, indent=2)


def _dumps(payload: dict[str, Any]) -> str:
    text = json.dumps(payload, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Text that is not Unicode (echoed from the input) is written as JSON escapes.
        text = json.dumps(payload)
    return text


def relevance_note(item: Mapping[str, Any]) -> str:
    """What a command's text says of an answer item's relevance: which branches found it, the
    similarity where the vector branch scored it, the calibrated relevance."""
    parts = []
    found = item.get("found_by") or []
    if found:
        alone = list(found) == ["vector"]
        parts.append("found by meaning only" if alone else "found by " + "+".join(found))
    if "similarity" in item:
        parts.append(f"similarity {item['similarity']:.3f}")
    if "relevance" in item:
        parts.append(f"relevance {item['relevance']:.2f}")
    return f"  [{', '.join(parts)}]" if parts else ""


def user_by_name(username: str, *, field: str = "--as") -> User:
    inputs.storable_text(username, field=field)
    try:
        user = User.objects.get(username=username, is_active=True)
    except User.DoesNotExist:
        raise ValidationFailure(field, f"no active user named {username!r}") from None
    return user


FILE_MISSING = "{path} does not exist"
FILE_IS_DIRECTORY = "{path} is a directory, not a file"
FILE_NOT_PERMITTED = "{path} cannot be read (permission denied)"
FILE_UNREADABLE = "{path} cannot be read ({problem})"


def file_refusal(path: str | Path, error: OSError, *, field: str) -> ValidationFailure:
    """Why the file at ``path`` cannot be read, naming ``field``: the one wording of every
    command that reads a file."""
    if isinstance(error, FileNotFoundError):
        return ValidationFailure(field, FILE_MISSING.format(path=path))
    if isinstance(error, IsADirectoryError):
        return ValidationFailure(field, FILE_IS_DIRECTORY.format(path=path))
    if isinstance(error, PermissionError):
        return ValidationFailure(field, FILE_NOT_PERMITTED.format(path=path))
    return ValidationFailure(field, FILE_UNREADABLE.format(path=path, problem=error.strerror))


def readable_file(path: Path, *, field: str = "FILE") -> Path:
    """``path`` when it is a file this process can read, else ``file_refusal``'s refusal."""
    if path.is_dir():
        # Opening a directory succeeds on some systems; it is never a file to read.
        raise ValidationFailure(field, FILE_IS_DIRECTORY.format(path=path))
    try:
        path.open("rb").close()
    except OSError as error:
        raise file_refusal(path, error, field=field) from None
    return path


def read_json_file(path: str, *, field: str = "FILE") -> Any:
    """The JSON value of the file at ``path``, checked by ``inputs.load_json``."""
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise file_refusal(path, error, field=field) from None
    return inputs.load_json(raw, field=field)


def integer_option(text: str | None, *, field: str, message: str) -> int | None:
    """An integer option's value (None when not given). Text that is not a whole number is
    refused as the service refuses an out-of-range one: the same field, the same message, so
    ``--budget abc`` and ``--budget 0`` read alike (and like the API's ``budget``)."""
    if text is None:
        return None
    if not re.fullmatch(r"\s*-?[0-9]{1,16}\s*", text):
        raise ValidationFailure(field, message)
    return int(text)


def parse_fact(text: str) -> tuple[str, object]:
    """``K=V`` from ``--fact``; integers stay integers so ranges can compare them."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ValidationFailure("--fact", f"{text!r} must look like NAME=VALUE")
    value = value.strip()
    number: object = int(value) if value.lstrip("-").isdigit() else value
    return name.strip(), number
