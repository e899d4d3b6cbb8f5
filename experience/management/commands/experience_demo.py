from __future__ import annotations

import argparse
from argparse import ArgumentParser
from typing import Any

from reviewconsole.cli import JsonCommand
from reviewconsole.temporary_database import (
    INNER_FLAG,
    enter_temporary_database,
    run_on_temporary_database,
)
from reviewconsole.timeparse import parse_aware_datetime

DEMO_NOW = "2026-09-18T14:30:00+08:00"


class Command(JsonCommand):
    help = (
        "Replay the four demo skill runs on a temporary SQLite database; "
        "the configured database is never touched."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(INNER_FLAG, action="store_true", dest="inner", help=argparse.SUPPRESS)

    def execute_json(self, **options: Any) -> dict[str, Any]:
        if options["inner"]:
            return self._replay_here()
        return run_on_temporary_database("experience_demo", timeout=600)

    def _replay_here(self) -> dict[str, Any]:
        enter_temporary_database()
        # The temporary database lives at a fixed time just after the demo ticket, so the
        # replays give the same answer whenever they are run.
        demo_now = parse_aware_datetime(DEMO_NOW, field="DEMO_NOW")

        from experience.demo import load_demo_experience, load_demo_knowledge, replays
        from reviewconsole.roles import Role
        from reviewconsole.services import user_set_role

        operator = user_set_role(username="demo-operator", role=Role.OPERATOR, now=demo_now)
        reviewer = user_set_role(username="demo-reviewer", role=Role.REVIEWER, now=demo_now)
        agent = user_set_role(username="demo-agent", role=Role.AGENT, now=demo_now)
        load_demo_knowledge(operator=operator, now=demo_now)
        loaded = load_demo_experience(operator=operator, reviewer=reviewer, now=demo_now)
        rows = replays(
            skill_id=loaded["skill"],
            revoke_case_id=loaded["cases"][0],
            reviewer=reviewer,
            agent=agent,
            now=demo_now,
        )
        return {
            "ok": all(row["as_expected"] for row in rows),
            "skill": loaded["skill"],
            "cases": loaded["cases"],
            "replays": rows,
        }

    def render_text(self, result: dict[str, Any]) -> str:
        header = f"{'replay':42} {'result':13} {'knowledge search':17} {'as expected':11}"
        lines = [header, "-" * len(header)]
        for row in result["replays"]:
            searched = "yes" if row["knowledge_search_executed"] else "no"
            lines.append(
                f"{row['replay']:42} {row['status']:13} {searched:17} "
                f"{'yes' if row['as_expected'] else 'NO'}"
            )
        impact = result["replays"][-1].get("revocation_impact", {})
        lines.append("")
        lines.append(f"revoking {result['cases'][0]}:")
        lines.append("  skills affected: " + (", ".join(impact.get("skills", [])) or "none"))
        lines.append("  runs to re-check: " + (", ".join(impact.get("runs", [])) or "none"))
        for row in result["replays"]:
            lines.append(f"  {row['run_id']}: {row['reason']}")
        return "\n".join(lines)
