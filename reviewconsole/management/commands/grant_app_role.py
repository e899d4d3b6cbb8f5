from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from reviewconsole.cli import JsonCommand
from reviewconsole.dbroles import app_role_grant


class Command(JsonCommand):
    help = (
        "PostgreSQL: grant the application's role (ROLE) what the console needs, run as the "
        "tables' owner after every migrate. Refused when ROLE could lift the audit guard "
        "(superuser, the owner or a member of it, owning anything, creating roles or databases)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("role", metavar="ROLE")

    def execute_json(self, **options: Any) -> dict[str, Any]:
        return {"ok": True, **app_role_grant(options["role"])}

    def render_text(self, result: dict[str, Any]) -> str:
        return (
            f"{result['role']} may read and write the {result['tables']} tables of schema "
            f"{result['schema']}; only read and append {', '.join(result['audit_tables'])}"
        )
