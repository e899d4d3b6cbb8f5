from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from experience.retrieval.block import BUDGET_INVALID, OK, experience_context
from experience.retrieval.context import MAX_BUDGET, smallest_block
from experience.retrieval.service import DEFAULT_LIMIT, LIMIT_INVALID, retrieve_experience
from reviewconsole import clock
from reviewconsole.cli import JsonCommand, integer_option, user_by_name
from reviewconsole.errors import ValidationFailure
from reviewconsole.scopes import SCOPE_FIELDS
from reviewconsole.services import SYSTEM_AGENT, system_agent
from reviewconsole.timeparse import parse_aware_datetime


def add_scope_arguments(parser: ArgumentParser) -> None:
    # Optional on purpose: a missing scope field is an answer (fallback + missing), not a usage error.
    for name in SCOPE_FIELDS:
        parser.add_argument(f"--{name}")


def scope_from_options(options: dict[str, Any]) -> dict[str, str | None]:
    return {name: options.get(name) for name in SCOPE_FIELDS}


class Command(JsonCommand):
    help = "Retrieve approved experience for one exact scope; records each read."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("query")
        add_scope_arguments(parser)
        parser.add_argument("--run-id", dest="run_id", required=True, metavar="R")
        parser.add_argument("--now", metavar="ISO", help="check time (default: now)")
        parser.add_argument("--limit", metavar="N", help=f"default: {DEFAULT_LIMIT}")
        parser.add_argument(
            "--format",
            dest="output_format",
            choices=("items", "context"),
            default="items",
            help="items (default) or context: a prompt-ready block within --budget tokens",
        )
        parser.add_argument(
            "--budget",
            metavar="N",
            help=f"tokens the context block may use (1-{MAX_BUDGET}); needed with --format context",
        )
        parser.add_argument(
            "--as",
            dest="as_user",
            metavar="USER",
            help=f"act as this account (default: {SYSTEM_AGENT})",
        )

    def execute_json(self, **options: Any) -> dict[str, Any]:
        actor = user_by_name(options["as_user"]) if options.get("as_user") else system_agent()
        now = (
            parse_aware_datetime(options["now"], field="--now")
            if options.get("now")
            else clock.now()
        )
        if options["output_format"] == "context":
            budget = integer_option(options.get("budget"), field="budget", message=BUDGET_INVALID)
            if budget is None:
                raise ValidationFailure("--budget", "is required with --format context")
            return experience_context(
                options["query"],
                scope_from_options(options),
                now,
                options["run_id"],
                budget,
                actor=actor,
            )
        limit = integer_option(options.get("limit"), field="limit", message=LIMIT_INVALID)
        return retrieve_experience(
            options["query"],
            scope_from_options(options),
            now,
            options["run_id"],
            DEFAULT_LIMIT if limit is None else limit,
            actor=actor,
        )

    def render_text(self, result: dict[str, Any]) -> str:
        lines = [f"status: {result['status']}"]
        if result["missing"]:
            lines.append("missing: " + ", ".join(result["missing"]))
        if "block" in result:
            lines.append(
                f"tokens: {result['tokens']} of {result['budget']} ({result['tokenizer']})"
            )
            if result["block"]:
                lines.append(result["block"])
            elif result["status"] == OK:
                lines.append(_empty_block_reason(result["budget"]))
            return "\n".join(lines)
        for item in result["items"]:
            lines.append(f"- {item['type']:6} {item['id']}  {item['title']}")
            confidence = item.get("confidence")
            about = [f"confidence {confidence:.3f}" if confidence is not None else "no confidence"]
            if item.get("lesson_type"):
                about.append(f"{item['lesson_type']}: {item.get('conclusion', '')}")
            if item.get("conflict"):
                about.append("in an open conflict")
            lines.append("         " + "; ".join(about))
        return "\n".join(lines)


def _empty_block_reason(budget: int) -> str:
    smallest = smallest_block()
    if budget < smallest:
        return (
            f"nothing fits: the header and one item's first line take {smallest} tokens; "
            f"give --budget {smallest} or more"
        )
    return (
        "no reviewed item of this scope is eligible now (approved, in force, with usable "
        "support and enough confidence)"
    )
