from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from evaluation.replay import load_ticket_set
from evaluation.selectors import HeldoutLeaked
from evaluation.services import heldout_register
from reviewconsole.cli import CommandRefused, JsonCommand, user_by_name


class Command(JsonCommand):
    help = (
        "Set a ticket set aside for evaluation before any replay: from now on no case citing "
        "one of its tickets or runs can be approved. Refused when a ticket already fed memory."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", metavar="FILE", help="a held-out ticket set (JSON)")
        parser.add_argument("--as", dest="as_user", metavar="USER", help="record who did it")

    def execute_json(self, **options: Any) -> dict[str, Any]:
        ticket_set = load_ticket_set(options["file"])
        actor = user_by_name(options["as_user"]) if options.get("as_user") else None
        try:
            created = heldout_register(ticket_set=ticket_set, actor=actor)
        except HeldoutLeaked as leaked:
            raise CommandRefused(str(leaked), leaked.as_json()) from None
        return {
            "ok": True,
            "set": ticket_set.name,
            "tickets": len(ticket_set.tickets),
            "registered": created,
        }

    def render_text(self, result: dict[str, Any]) -> str:
        already = result["tickets"] - len(result["registered"])
        return (
            f"{result['set']}: {len(result['registered'])} tickets newly held out, "
            f"{already} already held out"
        )
