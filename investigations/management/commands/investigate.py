from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from experience.management.commands.recall import add_scope_arguments, scope_from_options
from investigations.domain import MAX_CALLS_LIMIT
from investigations.providers import PROVIDERS, SCRIPTED
from investigations.services import MAX_CALLS_RANGE, investigation_answer, investigation_run
from knowledge.management.commands.research import add_fact_arguments, facts_from_options
from reviewconsole import clock
from reviewconsole.cli import JsonCommand, arguments_text, integer_option, user_by_name
from reviewconsole.errors import ValidationFailure
from reviewconsole.services import SYSTEM_AGENT, system_agent
from reviewconsole.timeparse import parse_aware_datetime

# The service names the fields of the API body; the shell names its flags.
FLAGS = {
    "text": "TEXT",
    "occurred_at": "--at",
    "known_at": "--known-at",
    "provider": "--provider",
    "run_id": "--run-id",
    "max_calls": "--max-calls",
}


def _flag(field: str) -> str:
    if field.startswith("scope."):
        return "--" + field.removeprefix("scope.")
    if field.startswith("facts"):
        return "--fact"
    return FLAGS.get(field, field)


class Command(JsonCommand):
    help = (
        "Investigate one ticket: run it through the investigation runner and print the steps "
        "and the answer, accepted only when every citation checks out against this run."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("text", metavar="TEXT")
        # A missing scope field is an answer (needs_context naming it), not a usage error.
        add_scope_arguments(parser)
        parser.add_argument("--at", required=True, metavar="ISO", help="when the problem occurred")
        parser.add_argument(
            "--known-at",
            metavar="ISO",
            dest="known_at",
            help="when the ticket became known; memory is read as of then (default: now)",
        )
        add_fact_arguments(parser)
        parser.add_argument("--provider", choices=PROVIDERS, default=SCRIPTED)
        parser.add_argument("--run-id", dest="run_id", metavar="R", help="default: a new id")
        parser.add_argument(
            "--max-calls", dest="max_calls", metavar="N", help=f"1 to {MAX_CALLS_LIMIT}"
        )
        parser.add_argument(
            "--as",
            dest="as_user",
            metavar="USER",
            help=f"act as this account (default: {SYSTEM_AGENT})",
        )

    def execute_json(self, **options: Any) -> dict[str, Any]:
        actor = user_by_name(options["as_user"]) if options.get("as_user") else system_agent()
        occurred_at = parse_aware_datetime(options["at"], field="--at")
        known_at = (
            parse_aware_datetime(options["known_at"], field="--known-at")
            if options.get("known_at")
            else clock.now()
        )
        try:
            max_calls = integer_option(
                options.get("max_calls"), field="max_calls", message=MAX_CALLS_RANGE
            )
            investigation = investigation_run(
                actor=actor,
                text=options["text"],
                scope=scope_from_options(options),
                occurred_at=occurred_at,
                known_at=known_at,
                facts=facts_from_options(options),
                provider=options["provider"],
                run_id=options.get("run_id"),
                max_calls=max_calls,
            )
        except ValidationFailure as failure:
            raise ValidationFailure(_flag(failure.field), failure.message) from None
        return investigation_answer(investigation)

    def render_text(self, result: dict[str, Any]) -> str:
        lines = [f"run: {result['run_id']}", f"status: {result['status']}"]
        if result["missing"]:
            lines.append("missing: " + ", ".join(result["missing"]))
        for step in result["steps"]:
            lines.append(
                f"- {step['tool']} {arguments_text(step['arguments'])} -> {step['outcome']}"
            )
        answer = result["answer"]
        if answer:
            lines.append(f"conclusion ({answer['conclusion_code']}): {answer['conclusion']}")
            if answer.get("model_text"):
                lines.append(f"  the model's own words (unverified): {answer['model_text']}")
            lines += [f"  ask: {followup}" for followup in answer["followups"]]
            lines += [f"  cites {c['id']}: {c['quote']}" for c in answer["citations"]]
        verification = result["verification"]
        verdict = (
            "verified" if verification["ok"] else "refused: " + ", ".join(verification["reasons"])
        )
        lines.append(f"verification: {verdict}")
        return "\n".join(lines)
