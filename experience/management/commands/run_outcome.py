from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from experience.review.outcomes import OUTCOMES, run_outcome_report
from reviewconsole.cli import JsonCommand, user_by_name


class Command(JsonCommand):
    help = "Report what happened after a run: resolved by its lead, the lead was wrong, unresolved."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("run_id", metavar="RUN_ID")
        parser.add_argument("--outcome", required=True, choices=OUTCOMES)
        parser.add_argument("--as", dest="as_user", required=True, metavar="USER")
        parser.add_argument("--note", default="")

    def execute_json(self, **options: Any) -> dict[str, Any]:
        return run_outcome_report(
            run_id=options["run_id"],
            outcome=options["outcome"],
            note=options["note"],
            actor=user_by_name(options["as_user"]),
        ).as_json()

    def render_text(self, result: dict[str, Any]) -> str:
        lines = [f"{result['run_id']}: {result['outcome']} (by {result['reported_by']})"]
        lines += [f"- {item['type']:6} {item['id']}" for item in result["items"]]
        return "\n".join(lines)
