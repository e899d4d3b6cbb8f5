from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from agentapi.services import token_by_prefix, token_revoke
from reviewconsole.cli import JsonCommand
from reviewconsole.timeparse import to_utc_iso


class Command(JsonCommand):
    help = "Revoke an API token, named by its prefix (as the admin lists it) or its full text."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("prefix", metavar="PREFIX")
        parser.add_argument("--reason", default="")

    def execute_json(self, **options: Any) -> dict[str, Any]:
        token = token_revoke(token=token_by_prefix(options["prefix"]), reason=options["reason"])
        return {
            "ok": True,
            "prefix": token.prefix,
            "user": token.user.get_username(),
            "revoked_at": to_utc_iso(token.revoked_at),
        }

    def render_text(self, result: dict[str, Any]) -> str:
        return f"token {result['prefix']} of {result['user']} revoked at {result['revoked_at']}"
