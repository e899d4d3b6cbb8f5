from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from experience.review.imports import items_import
from reviewconsole.cli import JsonCommand, read_json_file, user_by_name


class Command(JsonCommand):
    help = "Submit a JSON array of cases and skills as candidates, all or nothing."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", metavar="FILE")
        parser.add_argument("--as", dest="as_user", required=True, metavar="USER")

    def execute_json(self, **options: Any) -> dict[str, Any]:
        actor = user_by_name(options["as_user"])
        items = read_json_file(options["file"])
        results = items_import(items=items, actor=actor)
        return {
            "items": [
                {"index": index, "id": item.id, "type": item.type, "created": item.created}
                for index, item in enumerate(results)
            ]
        }

    def render_text(self, result: dict[str, Any]) -> str:
        lines = []
        for item in result["items"]:
            state = "created" if item["created"] else "unchanged"
            lines.append(f"[{item['index']}] {item['type']:5} {state:9} {item['id']}")
        return "\n".join(lines) or "nothing to import"
