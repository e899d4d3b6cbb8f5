from __future__ import annotations

import os
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from agentapi.auth import token_user
from agentapi.mcp_server import build_server

AGENT_VARIABLE = "CONSOLE_AGENT_TOKEN"
MISSING_CREDENTIAL = (
    f"give the agent token with --token or the {AGENT_VARIABLE} environment variable"
)
REFUSED_CREDENTIAL = "the agent token is invalid, revoked, or its user is inactive"


class Command(BaseCommand):
    help = (
        "Serve the agent tools (search_knowledge, retrieve_experience, run_skill, propose_case) "
        "over MCP on stdio, acting as the user of the given agent token."
    )
    # The protocol owns stdout; Django's checks must not write to it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--token",
            default=None,
            help=f"the agent token (default: ${AGENT_VARIABLE}; prefer the variable, "
            "command lines are visible to other local users)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        token = options["token"] or os.environ.get(AGENT_VARIABLE, "")
        if not token.strip():
            raise CommandError(MISSING_CREDENTIAL)
        if token_user(token) is None:
            raise CommandError(REFUSED_CREDENTIAL)
        build_server(token).run("stdio")
