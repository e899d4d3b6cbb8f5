from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from agentapi.services import token_create
from reviewconsole.cli import JsonCommand, user_by_name
from reviewconsole.timeparse import to_utc_iso


class Command(JsonCommand):
    help = (
        "Issue an API token acting as USER and print it. The token is shown only this once; "
        "only its hash is stored."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("user", metavar="USER")
        parser.add_argument("--name", default="", help="a label, e.g. where the token is used")

    def execute_json(self, **options: Any) -> dict[str, Any]:
        issued = token_create(
            user=user_by_name(options["user"], field="USER"), name=options["name"]
        )
        if not options.get("json"):
            self.stderr.write(
                "Store this token now: it is not shown again (only its hash is kept). "
                f"Revoke it with: manage.py revoke_token {issued.token.prefix}"
            )
        return {
            "token": issued.text,
            "prefix": issued.token.prefix,
            "user": issued.token.user.get_username(),
            "name": issued.token.name,
            "created_at": to_utc_iso(issued.token.created_at),
        }

    def render_text(self, result: dict[str, Any]) -> str:
        # Only the token on stdout, so `TOKEN=$(manage.py create_token agent-7)` works.
        return str(result["token"])
