"""``eval_retrieval FILE``: score a labelled query file against a scope, lexical and with the
vector branch, through the retrievals agents use (``evaluation.retrieval_eval``)."""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings

from evaluation.retrieval_eval import (
    DEFAULT_DEPTH,
    DEFAULT_K,
    MAX_DEPTH,
    NotIndexed,
    evaluation,
)
from evaluation.retrieval_scores import LEXICAL, VECTOR, queries_parsed
from reviewconsole import clock
from reviewconsole.cli import (
    CommandRefused,
    JsonCommand,
    integer_option,
    readable_file,
    user_by_name,
)
from reviewconsole.errors import ValidationFailure
from reviewconsole.inputs import NOT_UTF8
from reviewconsole.services import SYSTEM_AGENT, system_agent
from reviewconsole.timeparse import parse_aware_datetime

K_INVALID = f"must be an integer from 1 to {MAX_DEPTH}"
DEPTH_INVALID = f"must be an integer from 1 to {MAX_DEPTH}, at least -k"
ARM_TITLES = {LEXICAL: "lexical", VECTOR: "lexical + vector"}


class Command(JsonCommand):
    help = (
        "Score a labelled query file (JSON Lines) through knowledge search and experience "
        "retrieval, lexical only and with the vector branch: recall@k, MRR, and the share of "
        "nothing-queries answered with nothing, per language pair. Records nothing."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", metavar="FILE", help="the labelled queries, one JSON per line")
        parser.add_argument("--tenant", default=settings.DEMO_TENANT)
        parser.add_argument("--brand", default=settings.DEMO_BRAND)
        parser.add_argument("--store")
        parser.add_argument("--campaign")
        parser.add_argument("--deployment", help="experience retrieval's deployment")
        parser.add_argument(
            "--now", metavar="ISO", help="when experience is read (default: the clock)"
        )
        parser.add_argument(
            "--at", metavar="ISO", help="a knowledge query's occurred_at (default: --now)"
        )
        parser.add_argument(
            "--known-at", metavar="ISO", dest="known_at", help="its known_at (default: --at)"
        )
        parser.add_argument(
            "-k", dest="k", metavar="K", help=f"recall@K: the first K items (default {DEFAULT_K})"
        )
        parser.add_argument(
            "--depth",
            metavar="N",
            help=f"items asked for per query, for MRR (default {DEFAULT_DEPTH})",
        )
        parser.add_argument(
            "--lexical-only",
            action="store_true",
            help="only the lexical arm (a deployment without an embedder)",
        )
        parser.add_argument(
            "--allow-unindexed",
            action="store_true",
            help="report even when the vector arm could not search every item (a warning)",
        )
        parser.add_argument(
            "--as",
            dest="as_user",
            metavar="USER",
            help=f"ask as this account (default: {SYSTEM_AGENT})",
        )

    def execute_json(self, **options: Any) -> dict[str, Any]:
        k = integer_option(options.get("k"), field="-k", message=K_INVALID)
        k = DEFAULT_K if k is None else k
        if not 1 <= k <= MAX_DEPTH:
            raise ValidationFailure("-k", K_INVALID)
        depth = integer_option(options.get("depth"), field="--depth", message=DEPTH_INVALID)
        depth = max(DEFAULT_DEPTH, k) if depth is None else depth
        if not k <= depth <= MAX_DEPTH:
            raise ValidationFailure("--depth", DEPTH_INVALID)
        now = (
            parse_aware_datetime(options["now"], field="--now")
            if options.get("now")
            else clock.now()
        )
        occurred_at = (
            parse_aware_datetime(options["at"], field="--at") if options.get("at") else now
        )
        known_at = (
            parse_aware_datetime(options["known_at"], field="--known-at")
            if options.get("known_at")
            else occurred_at
        )
        defaults = {
            "tenant": options["tenant"],
            "brand": options["brand"],
            "store": options.get("store"),
            "campaign": options.get("campaign"),
            "deployment": options.get("deployment"),
            "now": now,
            "occurred_at": occurred_at,
            "known_at": known_at,
        }
        path = readable_file(Path(options["file"]))
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ValidationFailure("FILE", NOT_UTF8) from None
        queries = queries_parsed(text, defaults)
        actor = user_by_name(options["as_user"]) if options.get("as_user") else system_agent()
        try:
            report = evaluation(
                queries,
                actor,
                k=k,
                depth=depth,
                lexical_only=options["lexical_only"],
                allow_unindexed=options["allow_unindexed"],
            )
        except NotIndexed as refusal:
            raise CommandRefused(refusal.message, {"ok": False, "error": refusal.message}) from None
        return {"file": str(options["file"]), **report}

    def render_text(self, result: dict[str, Any]) -> str:
        return report_table(result)


def _cell(figures: dict[str, Any]) -> str:
    if not figures["queries"]:
        return "–"
    return f"{figures['recall_at_k']:.3f} · {figures['hits_at_k']}/{figures['queries']} · {figures['mrr']:.3f}"


def _nothing_cell(figures: dict[str, Any]) -> str:
    if not figures["queries"]:
        return "–"
    return f"{figures['answered_nothing']}/{figures['queries']} ({figures['share']:.3f})"


def report_table(result: dict[str, Any]) -> str:
    """The report as a Markdown table: a row per group of queries, a column per arm."""
    arms = result["arms"]
    summary = result["summary"]
    k = result["k"]
    lines = [
        f"{result['paraphrases']} paraphrase queries, {result['nothing']} nothing-queries; "
        f"k = {k}; embedder: {result['embedder'] or 'off'}",
        "",
        "| queries | n | " + " | ".join(ARM_TITLES[arm] for arm in arms) + " |",
        "|---|---:|" + "---:|" * len(arms),
    ]
    first = summary[arms[0]]

    def row(label: str, count: int, cells: list[str]) -> None:
        lines.append(f"| {label} | {count} | " + " | ".join(cells) + " |")

    row(
        f"paraphrases: recall@{k} · found in top {k} · MRR",
        first["paraphrases"]["queries"],
        [_cell(summary[arm]["paraphrases"]) for arm in arms],
    )
    for index, pair in enumerate(first["pairs"]):
        row(
            f"&nbsp;&nbsp;{pair['pair']}",
            pair["queries"],
            [_cell(summary[arm]["pairs"][index]) for arm in arms],
        )
    for kind, figures in first["kinds"].items():
        if figures["paraphrases"]["queries"]:
            row(
                f"&nbsp;&nbsp;{kind}",
                figures["paraphrases"]["queries"],
                [_cell(summary[arm]["kinds"][kind]["paraphrases"]) for arm in arms],
            )
    row(
        "nothing-queries answered with nothing",
        first["nothing"]["queries"],
        [_nothing_cell(summary[arm]["nothing"]) for arm in arms],
    )
    for index, language in enumerate(first["nothing_by_language"]):
        row(
            f"&nbsp;&nbsp;asked in {language['language']}",
            language["queries"],
            [_nothing_cell(summary[arm]["nothing_by_language"][index]) for arm in arms],
        )
    for kind, figures in first["kinds"].items():
        if figures["nothing"]["queries"]:
            row(
                f"&nbsp;&nbsp;{kind}",
                figures["nothing"]["queries"],
                [_nothing_cell(summary[arm]["kinds"][kind]["nothing"]) for arm in arms],
            )
    statuses = "; ".join(
        f"{ARM_TITLES[arm]}: "
        + ", ".join(f"{name} {n}" for name, n in summary[arm]["semantic"].items())
        for arm in arms
    )
    lines += ["", f"semantic: {statuses}"]
    lines += [f"warning: {warning}" for warning in result["warnings"]]
    return "\n".join(lines)
