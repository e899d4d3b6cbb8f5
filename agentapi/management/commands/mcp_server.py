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
STDIO_ONLY_OPTION = (
    "--token is for stdio; over HTTP every request carries its own agent token "
    "(Authorization: Bearer)"
)
DEFAULT_HTTP_PORT = 8100
DEFAULT_KEEP_ALIVE = 5  # uvicorn's own default


class Command(BaseCommand):
    help = (
        "Serve the agent tools over MCP: on stdio, acting as the user of the given agent token; "
        "or, with --http, over Streamable HTTP at http://HOST:PORT/mcp, each request acting as "
        "the user of its bearer token."
    )
    # The protocol owns stdout; Django's checks must not write to it.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--token",
            default=None,
            help=f"stdio: the agent token (default: ${AGENT_VARIABLE}; prefer the variable, "
            "command lines are visible to other local users)",
        )
        parser.add_argument(
            "--http",
            action="store_true",
            help="serve Streamable HTTP (POST /mcp, GET /healthz) instead of stdio",
        )
        parser.add_argument("--host", default="127.0.0.1", help="--http: the address to listen on")
        parser.add_argument(
            "--port",
            type=int,
            default=DEFAULT_HTTP_PORT,
            help=f"--http: the port to listen on (default {DEFAULT_HTTP_PORT})",
        )
        parser.add_argument(
            "--keep-alive",
            type=int,
            default=DEFAULT_KEEP_ALIVE,
            help="--http: seconds an idle connection is kept open (default "
            f"{DEFAULT_KEEP_ALIVE}); behind a load balancer, longer than it keeps one idle",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["http"]:
            if options["token"]:
                raise CommandError(STDIO_ONLY_OPTION)
            self._serve_http(options["host"], options["port"], options["keep_alive"])
            return
        token = options["token"] or os.environ.get(AGENT_VARIABLE, "")
        if not token.strip():
            raise CommandError(MISSING_CREDENTIAL)
        if token_user(token) is None:
            raise CommandError(REFUSED_CREDENTIAL)
        build_server(token).run("stdio")

    def _serve_http(self, host: str, port: int, keep_alive: int) -> None:
        import uvicorn

        from agentapi.mcp_http import application

        if not 0 < port < 65536:
            raise CommandError("--port must be between 1 and 65535")
        if keep_alive < 1:
            raise CommandError("--keep-alive must be at least 1 second")
        uvicorn.run(
            application(),
            host=host,
            port=port,
            log_level="info",
            timeout_keep_alive=keep_alive,
            # Behind the production proxy: the client address it forwards, from loopback only.
            proxy_headers=True,
            forwarded_allow_ips="127.0.0.1",
        )
