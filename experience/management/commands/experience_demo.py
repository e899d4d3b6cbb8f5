from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.db import connections

from reviewconsole import clock
from reviewconsole.cli import JsonCommand
from reviewconsole.errors import ValidationFailure
from reviewconsole.timeparse import parse_aware_datetime

# Set by the outer process for the inner one: the only database the replays may write to.
TEMPORARY_DATABASE_ENV = "EXPERIENCE_DEMO_TEMPORARY_DATABASE"
INNER_FLAG = "--inside-temporary-database"
DEMO_NOW = "2026-09-18T14:30:00+08:00"
NOT_TEMPORARY = "the replays only run on the temporary database this command creates"


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
        with tempfile.TemporaryDirectory(prefix="experience-demo-") as directory:
            database = Path(directory) / "demo.sqlite3"
            env = {
                **os.environ,
                "DATABASE_URL": f"sqlite:///{database}",
                TEMPORARY_DATABASE_ENV: str(database),
            }
            completed = subprocess.run(  # noqa: S603 - our own manage.py, fixed arguments
                [
                    sys.executable,
                    str(Path(settings.BASE_DIR) / "manage.py"),
                    "experience_demo",
                    INNER_FLAG,
                    "--json",
                    # Checks of unrelated apps (URLs, templates) must not block the replays.
                    "--skip-checks",
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
        if completed.returncode != 0:
            raise ValidationFailure(
                "experience_demo", f"the replay process failed: {completed.stderr.strip()[-2000:]}"
            )
        result: dict[str, Any] = json.loads(completed.stdout)
        return result

    def _replay_here(self) -> dict[str, Any]:
        configured = str(connections["default"].settings_dict["NAME"])
        expected = os.environ.get(TEMPORARY_DATABASE_ENV)
        if not expected or configured != expected:
            raise ValidationFailure(INNER_FLAG, NOT_TEMPORARY)
        call_command("migrate", verbosity=0, interactive=False)
        # The temporary database lives at a fixed time just after the demo ticket, so the
        # replays give the same answer whenever they are run.
        demo_now = parse_aware_datetime(DEMO_NOW, field="DEMO_NOW")
        clock.now = lambda: demo_now

        from experience.demo import load_demo_experience, load_demo_knowledge, replays
        from reviewconsole.roles import Role
        from reviewconsole.services import user_set_role

        operator = user_set_role(username="demo-operator", role=Role.OPERATOR)
        reviewer = user_set_role(username="demo-reviewer", role=Role.REVIEWER)
        load_demo_knowledge(operator=operator)
        loaded = load_demo_experience(operator=operator, reviewer=reviewer)
        rows = replays(
            skill_id=loaded["skill"], revoke_case_id=loaded["cases"][0], reviewer=reviewer
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
