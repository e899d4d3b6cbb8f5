from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from reviewconsole.cli import JsonCommand
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role


class Command(JsonCommand):
    help = "Create or update a user in one role (reviewer, operator, admin or agent)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--role", required=True, choices=Role.values)
        parser.add_argument("--password", default=None)
        tenancy = parser.add_mutually_exclusive_group()
        tenancy.add_argument(
            "--tenant",
            action="append",
            default=None,
            metavar="T",
            help="limit the user to this tenant (repeat for several); replaces earlier ones",
        )
        tenancy.add_argument(
            "--all-tenants", action="store_true", help="remove tenant limits (deployment-wide)"
        )

    def execute_json(self, **options: Any) -> dict[str, Any]:
        tenants = [] if options["all_tenants"] else options["tenant"]
        user = user_set_role(
            username=options["name"],
            role=options["role"],
            password=options["password"],
            tenants=tenants,
        )
        return {"username": user.get_username(), "role": options["role"]}

    def render_text(self, result: dict[str, Any]) -> str:
        return f"{result['username']} is now {result['role']}"
