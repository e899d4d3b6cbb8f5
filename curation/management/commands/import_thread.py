from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from curation.threads import thread_import
from reviewconsole.cli import JsonCommand, read_json_file, user_by_name


class Command(JsonCommand):
    help = (
        "Import an investigation thread (JSON: id, tenant, title, source, messages with id, "
        "author, role, time, text, attachments) for operators of that tenant to build "
        "candidate cases from. The tenant must be one the importing user may use."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", metavar="FILE")
        parser.add_argument("--as", dest="as_user", required=True, metavar="USER")

    def execute_json(self, **options: Any) -> dict[str, Any]:
        actor = user_by_name(options["as_user"])
        thread, created = thread_import(data=read_json_file(options["file"]), actor=actor)
        return {
            "ok": True,
            "thread_id": thread.thread_id,
            "tenant": thread.tenant,
            "messages": thread.messages.count(),
            "created": created,
        }

    def render_text(self, result: dict[str, Any]) -> str:
        state = "imported" if result["created"] else "unchanged"
        return f"{result['thread_id']}: {state}, {result['messages']} messages"
