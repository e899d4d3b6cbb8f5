from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from reviewconsole.backup import database_backup
from reviewconsole.cli import JsonCommand


class Command(JsonCommand):
    help = "Write an online backup of the SQLite database to a new file."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("output", metavar="OUTPUT")

    def execute_json(self, **options: Any) -> dict[str, Any]:
        destination = Path(options["output"]).resolve()
        pages, anchored = database_backup(destination=destination)
        return {"ok": True, "file": str(destination), "pages": pages, "anchored": anchored}

    def render_text(self, result: dict[str, Any]) -> str:
        recorded = "; its chain head recorded in the anchor file" if result["anchored"] else ""
        return f"backup written to {result['file']} ({result['pages']} pages){recorded}"
