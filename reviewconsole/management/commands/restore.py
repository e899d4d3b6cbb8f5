from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from reviewconsole.backup import database_restore
from reviewconsole.cli import JsonCommand
from reviewconsole.errors import ValidationFailure


class Command(JsonCommand):
    help = (
        "Replace the SQLite database's content with a backup made by `backup`, once the backup "
        "proves intact and its audit chain verifies; the restore is recorded as an audit event."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", metavar="FILE")
        parser.add_argument("--yes", action="store_true", help="confirm the replacement")

    def execute_json(self, **options: Any) -> dict[str, Any]:
        if not options["yes"]:
            raise ValidationFailure("--yes", "restoring replaces every row; confirm with --yes")
        restored = database_restore(source_file=Path(options["file"]).resolve())
        return {"ok": True, **restored}

    def render_text(self, result: dict[str, Any]) -> str:
        return (
            f"restored ({result['pages']} pages, {result['events']} audit events verified; "
            f"backup sha256 {result['sha256']})"
        )
