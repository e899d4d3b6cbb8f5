from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from reviewconsole.cli import JsonCommand, user_by_name
from reviewconsole.services import tenant_create


class Command(JsonCommand):
    help = (
        "Add a tenant to the registry (memberships, imports and requests must name a known "
        "tenant). Without --as it acts as the shell; with --as the user must be a "
        "deployment-wide admin. An existing tenant is left as it is."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("name", metavar="NAME")
        parser.add_argument("--as", dest="as_user", metavar="USER", default=None)

    def execute_json(self, **options: Any) -> dict[str, Any]:
        actor = user_by_name(options["as_user"]) if options.get("as_user") else None
        tenant, created = tenant_create(name=options["name"], actor=actor)
        return {"tenant": tenant.name, "created": created}

    def render_text(self, result: dict[str, Any]) -> str:
        state = "created" if result["created"] else "already exists"
        return f"tenant {result['tenant']} {state}"
