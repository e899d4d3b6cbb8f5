from __future__ import annotations

import json
from argparse import ArgumentParser
from typing import Any

from experience.cases.executor import run_skill
from experience.cases.schema import TicketContext
from experience.management.commands.recall import add_scope_arguments, scope_from_options
from knowledge.management.commands.research import add_fact_arguments, facts_from_options
from reviewconsole import clock
from reviewconsole.cli import JsonCommand, arguments_text, user_by_name
from reviewconsole.errors import ValidationFailure
from reviewconsole.services import SYSTEM_AGENT, system_agent
from reviewconsole.timeparse import parse_aware_datetime


def _optional_time(options: dict[str, Any], name: str, flag: str) -> Any:
    value = options.get(name)
    return parse_aware_datetime(value, field=flag) if value else None


PROVIDERS = ("scripted", "live")
INPUT_FORMAT = "must be NAME=VALUE"


def inputs_from_options(options: dict[str, Any]) -> dict[str, object]:
    """``--input NAME=VALUE`` pairs (a prompt-form skill's declared inputs); the skill says
    which names and types it takes (refused naming ``inputs.NAME``)."""
    inputs: dict[str, object] = {}
    for text in options.get("input") or []:
        name, sep, value = str(text).partition("=")
        if not sep or not name.strip():
            raise ValidationFailure("--input", INPUT_FORMAT)
        if name.strip() in inputs:
            raise ValidationFailure(f"inputs.{name.strip()}", "is given twice")
        inputs[name.strip()] = value
    return inputs


class Command(JsonCommand):
    help = (
        "Run a skill for the current ticket: a recipe skill's read-only checks, or a prompt-form "
        "skill's sub-agent through the investigation runner."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("skill_id", metavar="ID")
        add_scope_arguments(parser)
        parser.add_argument("--at", metavar="ISO", help="when the problem occurred")
        parser.add_argument("--known-at", dest="known_at", metavar="ISO")
        add_fact_arguments(parser)
        parser.add_argument("--run-id", dest="run_id", required=True, metavar="R")
        parser.add_argument("--now", metavar="ISO", help="check time (default: now)")
        parser.add_argument(
            "--input",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="a prompt-form skill's declared input (repeatable)",
        )
        parser.add_argument(
            "--provider",
            choices=PROVIDERS,
            help="a prompt-form skill's sub-agent (default: scripted)",
        )
        parser.add_argument(
            "--as",
            dest="as_user",
            metavar="USER",
            help=f"act as this account (default: {SYSTEM_AGENT})",
        )

    def execute_json(self, **options: Any) -> dict[str, Any]:
        actor = user_by_name(options["as_user"]) if options.get("as_user") else system_agent()
        context = TicketContext(
            occurred_at=_optional_time(options, "at", "--at"),
            known_at=_optional_time(options, "known_at", "--known-at"),
            facts=facts_from_options(options),
        )
        now = _optional_time(options, "now", "--now") or clock.now()
        return run_skill(
            options["skill_id"],
            scope_from_options(options),
            context,
            options["run_id"],
            now,
            actor=actor,
            inputs=inputs_from_options(options),
            provider=options.get("provider"),
        ).as_json()

    def render_text(self, result: dict[str, Any]) -> str:
        lines = [
            f"status: {result['status']}",
            f"reason: {result['reason']}",
            f"run: {result['run_id']}  tool calls: {result['tool_calls']}",
        ]
        if result.get("form") == "prompt":
            lines.append(f"prompt skill, provider: {result.get('provider')}")
        for step in result["steps"]:
            lines.append(
                f"step {step['index']}: {step['tool']} {arguments_text(step['arguments'])} "
                f"→ {step['status']}"
            )
        for observation in result["observations"]:
            lines.append(f"observed (step {observation['step']}): {observation['status']}")
            for item in observation["evidence"]:
                lines.append(f"  - {item['id']}  {item['quote']}")
        if result.get("output") is not None:
            lines.append("output: " + json.dumps(result["output"], ensure_ascii=False))
        if result["cases"]:
            lines.append("historical leads: " + ", ".join(result["cases"]))
        return "\n".join(lines)
