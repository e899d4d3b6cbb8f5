"""``reembed``: compute the vectors of every indexed item with the configured embedder.

After a model change (``SEMANTIC_EMBEDDER``, ``CONSOLE_EMBEDDINGS_MODEL``) nothing is compared
across models: until a scope is packed again with the new model its searches are lexical and say
``semantic: not_indexed``. By default the work is queued for the workers (``reembed_task``);
``--wait`` does it here, printing progress; ``--status`` only reports.
"""

from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from reviewconsole.cli import JsonCommand
from semantic import embedders
from semantic.packing import every_scope_packed, status
from semantic.tasks import reembed_task


class Command(JsonCommand):
    help = "Embed every indexed item with the configured embedder (queued, or --wait)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--wait", action="store_true", help="embed here and now, printing progress"
        )
        parser.add_argument(
            "--status", action="store_true", help="only report what is embedded and packed"
        )

    def execute_json(self, **options: Any) -> dict[str, Any]:
        if not options["status"]:
            if not embedders.enabled():
                return {"ok": True, "queued": False, "embedded": 0, "status": status()}
            if options["wait"]:
                quiet = options["json"]

                def progress(space: str, done: int, total: int, made: int) -> None:
                    if not quiet:
                        self.stderr.write(f"{space}: scope {done}/{total}, {made} items embedded")

                made = every_scope_packed(progress)
                return {"ok": True, "queued": False, "embedded": made, "status": status()}
            reembed_task.enqueue()
            return {"ok": True, "queued": True, "embedded": 0, "status": status()}
        return {"ok": True, "queued": False, "embedded": 0, "status": status()}

    def render_text(self, result: dict[str, Any]) -> str:
        lines = []
        if result["queued"]:
            lines.append("queued for the workers (manage.py worker); see progress with --status")
        elif result["embedded"]:
            lines.append(f"embedded {result['embedded']} items")
        for name, figures in result["status"].items():
            lines.append(f"{name}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
        return "\n".join(lines)
