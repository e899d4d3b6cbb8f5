from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.conf import settings

from knowledge.conclusions import with_allowed_conclusions
from knowledge.search import DEFAULT_LIMIT, KnowledgeContext, search_knowledge
from reviewconsole.cli import JsonCommand, parse_fact, relevance_note, user_by_name
from reviewconsole.services import SYSTEM_AGENT, system_agent
from reviewconsole.timeparse import parse_aware_datetime


def add_fact_arguments(parser: ArgumentParser) -> None:
    parser.add_argument("--channel")
    parser.add_argument("--product")
    parser.add_argument("--basket-cents", type=int, dest="basket_cents")
    parser.add_argument("--fact", action="append", default=[], metavar="K=V")


def facts_from_options(options: dict[str, Any]) -> dict[str, object]:
    facts: dict[str, object] = dict(parse_fact(text) for text in options["fact"])
    for name in ("channel", "product", "basket_cents"):
        if options.get(name) is not None:
            facts[name] = options[name]
    return facts


class Command(JsonCommand):
    help = "Search the knowledge base for one ticket's scope and facts."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("query")
        parser.add_argument("--tenant", default=settings.DEMO_TENANT)
        parser.add_argument("--brand", default=settings.DEMO_BRAND)
        parser.add_argument("--store")
        parser.add_argument("--campaign")
        parser.add_argument("--at", required=True, metavar="ISO", help="when the problem occurred")
        parser.add_argument("--known-at", required=True, metavar="ISO", dest="known_at")
        parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT)
        add_fact_arguments(parser)
        parser.add_argument(
            "--as",
            dest="as_user",
            metavar="USER",
            help=f"search as this account (default: {SYSTEM_AGENT})",
        )

    def execute_json(self, **options: Any) -> dict[str, Any]:
        actor = user_by_name(options["as_user"]) if options.get("as_user") else system_agent()
        context = KnowledgeContext(
            tenant=options["tenant"],
            brand=options["brand"],
            store=options["store"],
            campaign=options["campaign"],
            occurred_at=parse_aware_datetime(options["at"], field="--at"),
            known_at=parse_aware_datetime(options["known_at"], field="--known-at"),
            facts=facts_from_options(options),
            limit=options["limit"],
        )
        # Each item also says the one conclusion it allows (docs/contracts.md, Investigations).
        # The search checks the actor's permission and the tenant (which must exist) first.
        return with_allowed_conclusions(search_knowledge(options["query"], context, actor=actor))

    def render_text(self, result: dict[str, Any]) -> str:
        lines = [f"status: {result['status']}"]
        if result["missing"]:
            lines.append("missing: " + ", ".join(result["missing"]))
        if "semantic" in result:
            lines.append(f"semantic: {result['semantic']}")
        for item in result["evidence"]:
            lines.append(
                f"- {item['id']}  {item['quote']}  => {item['allowed_conclusion']}"
                + relevance_note(item)
            )
        if result["truncated"]:
            lines.append("(more documents matched; the list was cut)")
        return "\n".join(lines)
