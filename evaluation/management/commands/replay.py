from __future__ import annotations

import argparse
import json
import os
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.db import transaction

from evaluation.chart import chart_title, render_chart
from evaluation.demo import replay_demo_here
from evaluation.domain import DEMO, LEXICAL, MEMORIES, VECTOR, WITH, WITHOUT, TicketSet
from evaluation.replay import load_ticket_set, replay_current, vector_branch_required
from evaluation.selectors import HeldoutLeaked, heldout_check, require_known_tenants
from evaluation.services import report_store
from investigations.domain import Provider
from investigations.providers import PROVIDERS, provider_for
from reviewconsole.cli import CommandRefused, JsonCommand, user_by_name
from reviewconsole.errors import ValidationFailure
from reviewconsole.temporary_database import (
    INNER_FLAG,
    enter_temporary_database,
    run_on_temporary_database,
)
from reviewconsole.timeparse import parse_optional_aware_datetime

CHANGED = "changed while it was being replayed"
OUT_NOT_DIRECTORY = "is not a directory that can be written to"

COLUMNS = (
    ("missed_checks", "missed"),
    ("wrong_causes", "wrong"),
    ("correct_causes", "right"),
    ("necessary_followups", "nec.q"),
    ("unnecessary_followups", "unnec.q"),
    ("tool_calls", "calls"),
    ("calls_to_cause", "to cause"),
)


class Command(JsonCommand):
    help = (
        "Replay a held-out ticket set with and without memory (knowledge search, then the "
        "context block when the rules leave the failure unexplained) and count missed checks, "
        "wrong causes, follow-up questions, tool calls and calls to the true cause. The "
        "memory's database is left as it was."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", metavar="FILE", help="a held-out ticket set (JSON)")
        parser.add_argument(
            "--memory",
            choices=MEMORIES,
            help="demo: the shipped demo memory on a temporary database; current: this "
            "database's memory inside a rolled-back transaction (default: the set's own "
            '"memory" field, else current)',
        )
        parser.add_argument("--out", metavar="DIR", help="also write NAME.json and NAME.png here")
        parser.add_argument("--as", dest="as_user", metavar="USER", help="record who ran it")
        parser.add_argument(
            "--provider",
            choices=PROVIDERS,
            help="drive both arms through the investigation runner with this provider (live "
            "needs CONSOLE_LLM_BASE_URL and CONSOLE_LLM_MODEL); default: the fixed policy",
        )
        parser.add_argument(
            "--compare-branches",
            action="store_true",
            dest="compare_branches",
            help="also run the arm with memory with the vector branch off, over the same "
            "memory, and report per situation the wrong causes and the leads taken on no-match "
            "tickets lexical only against with the vector branch, and whether it holds",
        )
        parser.add_argument(INNER_FLAG, action="store_true", dest="inner", help=argparse.SUPPRESS)
        parser.add_argument("--expect-hash", dest="expect_hash", help=argparse.SUPPRESS)
        # The moment the report is stored at, for a loader that dates what it loads (the demo).
        parser.add_argument("--at", dest="at", help=argparse.SUPPRESS)

    def execute_json(self, **options: Any) -> dict[str, Any]:
        ticket_set = load_ticket_set(options["file"])
        provider_name = options.get("provider")
        try:
            provider = provider_for(provider_name) if provider_name else None
        except ValidationFailure as failure:
            raise ValidationFailure("--provider", failure.message) from None
        compare = bool(options.get("compare_branches"))
        if compare:
            vector_branch_required()
        if options["inner"]:
            return self._replay_here(
                ticket_set, options.get("expect_hash"), provider, compare_branches=compare
            )
        memory = options["memory"] or ticket_set.memory
        actor = user_by_name(options["as_user"]) if options.get("as_user") else None
        at = parse_optional_aware_datetime(options.get("at"), field="--at")
        out = _out_directory(options.get("out"))
        # The tickets' tenants are this deployment's (the demo memory's temporary database
        # registers them in turn).
        require_known_tenants(ticket_set)
        try:
            if memory == DEMO:
                # The demo memory is fresh, but a ticket that fed this database's memory is
                # not held out for this team either.
                heldout_check(ticket_set)
                result = self._replay_on_temporary_database(
                    options["file"], ticket_set, provider_name, compare_branches=compare
                )
            else:
                result = replay_current(ticket_set, provider=provider, compare_branches=compare)
            if provider_name:
                result = {**result, "provider": provider_name}
            chart = render_chart(
                title=chart_title(
                    ticket_set=ticket_set.name, tickets=len(ticket_set.tickets), memory=memory
                ),
                with_memory=result["totals"][WITH],
                without_memory=result["totals"][WITHOUT],
            )
            with transaction.atomic():
                report = report_store(
                    ticket_set=ticket_set,
                    memory=memory,
                    result=result,
                    chart=chart,
                    actor=actor,
                    now=at,
                )
                payload = {"ok": True, "report": report.pk, **result}
                if out is not None:
                    payload["files"] = _write(out, ticket_set.name, payload, chart)
        except HeldoutLeaked as leaked:
            raise CommandRefused(str(leaked), leaked.as_json()) from None
        return payload

    def _replay_on_temporary_database(
        self,
        file: str,
        ticket_set: TicketSet,
        provider_name: str | None,
        *,
        compare_branches: bool = False,
    ) -> dict[str, Any]:
        return run_on_temporary_database(
            "replay",
            str(Path(file).resolve()),
            "--memory",
            DEMO,
            "--expect-hash",
            ticket_set.content_hash,
            *(("--provider", provider_name) if provider_name else ()),
            *(("--compare-branches",) if compare_branches else ()),
            timeout=1800,
        )

    def _replay_here(
        self,
        ticket_set: TicketSet,
        expect_hash: str | None,
        provider: Provider | None,
        *,
        compare_branches: bool = False,
    ) -> dict[str, Any]:
        enter_temporary_database()
        if expect_hash != ticket_set.content_hash:
            raise ValidationFailure("FILE", CHANGED)
        try:
            return replay_demo_here(
                ticket_set, provider=provider, compare_branches=compare_branches
            )
        except HeldoutLeaked as leaked:
            raise CommandRefused(str(leaked), leaked.as_json()) from None

    def render_text(self, result: dict[str, Any]) -> str:
        if "branches" not in result:
            return render_table(result)
        return render_table(result) + "\n\n" + render_branches(result["branches"])


def _out_directory(value: str | None) -> Path | None:
    """The --out directory, checked before the replay; it is created only when writing."""
    if not value:
        return None
    path = Path(value)
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise ValidationFailure("--out", OUT_NOT_DIRECTORY)
    return path


def _write(out: Path, name: str, payload: dict[str, Any], chart: bytes) -> dict[str, str]:
    json_path, chart_path = out / f"{name}.json", out / f"{name}.png"
    files = {"json": str(json_path), "chart": str(chart_path)}
    try:
        out.mkdir(parents=True, exist_ok=True)
        json_path.write_text(
            json.dumps({**payload, "files": files}, ensure_ascii=False, indent=2) + "\n",
            encoding="utf-8",
        )
        chart_path.write_bytes(chart)
    except OSError as exc:
        raise ValidationFailure("--out", f"{OUT_NOT_DIRECTORY}: {exc}") from None
    return files


def _pair(counts: dict[str, Any], name: str) -> str:
    return f"{counts[WITH][name]} / {counts[WITHOUT][name]}"


def render_table(result: dict[str, Any]) -> str:
    """The with/without table: one line per ticket, per situation, and the totals."""
    tickets = result["tickets"]
    width = max([len("ticket"), *(len(t["id"]) for t in tickets)])
    groups = [f"{g['situation']} ({g['tickets']})" for g in result["situations"]]
    situation_width = max(len(label) for label in ["situation", *groups])
    header = f"{'ticket':{width}}  {'situation':{situation_width}}" + "".join(
        f"  {label:>9}" for _, label in COLUMNS
    )
    rule = "-" * len(header)
    memory = result["memory"]
    lines = [
        f"replay of {result['set']['name']} against the {memory} memory: "
        f"{result['set']['tickets']} tickets (report {result.get('report', '-')})",
        "each cell: with memory / without memory",
        "",
        header,
        rule,
    ]
    for ticket in tickets:
        counts = {WITH: ticket[WITH]["counts"], WITHOUT: ticket[WITHOUT]["counts"]}
        lines.append(
            f"{ticket['id']:{width}}  {ticket['situation']:{situation_width}}"
            + "".join(f"  {_pair(counts, name):>9}" for name, _ in COLUMNS)
        )
    lines.append(rule)
    for group, label in zip(result["situations"], groups, strict=True):
        lines.append(
            f"{'':{width}}  {label:{situation_width}}"
            + "".join(f"  {_pair(group, name):>9}" for name, _ in COLUMNS)
        )
    lines.append(rule)
    totals = result["totals"]
    lines.append(
        f"{'total':{width}}  {'':{situation_width}}"
        + "".join(f"  {_pair(totals, name):>9}" for name, _ in COLUMNS)
    )
    lines.append("")
    lines += [f"memory: {note}" for note in result.get("memory_notes", [])]
    for kind, path in (result.get("files") or {}).items():
        lines.append(f"{kind}: {path}")
    return "\n".join(lines)


def _branch_pair(counts: dict[str, Any], name: str) -> str:
    return f"{counts[name][LEXICAL]} / {counts[name][VECTOR]}"


def _branch_row(group: dict[str, Any], width: int) -> str:
    return (
        f"{group['situation']:{width}}  {group['tickets']:>7}  "
        f"{_branch_pair(group, 'wrong_causes'):>12}  "
        f"{_branch_pair(group, 'no_match_leads'):>14}  {_branch_pair(group, 'leads'):>7}  "
        f"{'yes' if group['holds'] else 'NO'}"
    )


def render_branches(branches: dict[str, Any]) -> str:
    """The arm with memory, lexical only / with the vector branch, per situation."""
    total = {**branches["totals"], "situation": "total"}
    width = max(len(group["situation"]) for group in [*branches["situations"], total])
    width = max(width, len("situation"))
    header = (
        f"{'situation':{width}}  {'tickets':>7}  {'wrong causes':>12}  "
        f"{'no-match leads':>14}  {'leads':>7}  holds"
    )
    rule = "-" * len(header)
    semantic = ", ".join(f"{status} {n}" for status, n in branches["semantic"].items())
    lines = [
        f"memory's branches, the arm with memory: lexical only / with the vector branch "
        f"({branches['embedder']}; its searches: {semantic or 'none'})",
        f"a no-match ticket is one of situation {branches['no_match_situation']}: nothing in "
        "memory answers it",
        "",
        header,
        rule,
    ]
    lines += [_branch_row(group, width) for group in branches["situations"]]
    lines += [rule, _branch_row(total, width), ""]
    lines.append(
        "the vector branch holds in every situation"
        if branches["holds"]
        else "the vector branch does NOT hold: more wrong causes or no-match leads than lexical "
        "in a situation marked NO"
    )
    return "\n".join(lines)
