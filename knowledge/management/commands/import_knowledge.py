from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from knowledge.services import documents_import
from reviewconsole.cli import JsonCommand, read_json_file, user_by_name


class Command(JsonCommand):
    help = (
        "Import a JSON array of knowledge documents atomically; identical content is a no-op. "
        '"approved": true migrates an approval given before the import: the audit log records '
        "it as an attested import by the importing user."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file")
        parser.add_argument("--as", dest="as_user", required=True, metavar="USER")

    def execute_json(self, **options: Any) -> dict[str, Any]:
        actor = user_by_name(options["as_user"])
        items = read_json_file(options["file"])
        result = documents_import(items=items, actor=actor)
        return {"created": result.created, "unchanged": result.unchanged}

    def render_text(self, result: dict[str, Any]) -> str:
        return f"created {len(result['created'])}, unchanged {len(result['unchanged'])}"
