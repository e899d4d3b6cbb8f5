"""The shared shape of management commands: ``--json`` output and refusals.

With ``--json`` stdout holds exactly one JSON object, also when the command refuses or the
arguments are wrong; refusals exit non-zero and name the field that is wrong.
"""

from __future__ import annotations

import json
import sys
from argparse import ArgumentParser
from typing import Any, NoReturn

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from reviewconsole.errors import PermissionRefused, ValidationFailure


class CommandRefused(Exception):
    """A refusal whose JSON payload is already known (e.g. unmet approval conditions)."""

    def __init__(self, message: str, payload: dict[str, Any]) -> None:
        super().__init__(message)
        self.payload = payload


class JsonCommand(BaseCommand):
    """Subclasses implement ``execute_json`` returning the JSON object, and ``render_text``."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.add_argument("--json", action="store_true", help="print one JSON object")
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
        if as_json:
            self.stdout.write(json.dumps(result, ensure_ascii=False))
        else:
            self.stdout.write(self.render_text(result))

    def _emit(self, payload: dict[str, Any], as_json: bool, *, text: str) -> None:
        if as_json:
            self.stdout.write(json.dumps(payload, ensure_ascii=False))

    def execute_json(self, **options: Any) -> dict[str, Any]:
        raise NotImplementedError

    def render_text(self, result: dict[str, Any]) -> str:
        return json.dumps(result, ensure_ascii=False, indent=2)


def user_by_name(username: str, *, field: str = "--as") -> User:
    try:
        user = User.objects.get(username=username, is_active=True)
    except User.DoesNotExist:
        raise ValidationFailure(field, f"no active user named {username!r}") from None
    return user


def read_json_file(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise ValidationFailure("FILE", f"{path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise ValidationFailure(
            "FILE", f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except UnicodeDecodeError:
        raise ValidationFailure("FILE", "is not UTF-8 text") from None


def parse_fact(text: str) -> tuple[str, object]:
    """``K=V`` from ``--fact``; integers stay integers so ranges can compare them."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ValidationFailure("--fact", f"{text!r} must look like NAME=VALUE")
    value = value.strip()
    number: object = int(value) if value.lstrip("-").isdigit() else value
    return name.strip(), number
