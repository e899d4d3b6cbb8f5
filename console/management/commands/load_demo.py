from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from django.db import transaction

from console.demo import demo_replay_report, load_demo_world
from reviewconsole.cli import JsonCommand


class Command(JsonCommand):
    help = (
        "Create the demo users and load the demo world: knowledge, cases, skills and lessons, "
        "runs (one read a case revoked later), an investigation, a thread and its candidate, "
        "the curation scan and a stored replay report; dated relative to now (idempotent)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--url",
            metavar="URL",
            help="the address the console is served on, printed for the user (make run passes "
            "the one it serves); without it no address is printed",
        )
        parser.add_argument(
            "--no-replay",
            action="store_true",
            dest="no_replay",
            help="skip the replay of the held-out set (its report takes a while to compute)",
        )

    def execute_json(self, **options: Any) -> dict[str, Any]:
        with transaction.atomic():
            result = load_demo_world()
        if not options["no_replay"]:
            # Outside the transaction above: the replay runs in a separate process on a
            # temporary database, then stores its report here.
            result["replay_report"] = demo_replay_report()
        url = (options.get("url") or "").strip()
        result["url"] = url.rstrip("/") + "/" if url else None
        return result

    def render_text(self, result: dict[str, Any]) -> str:
        lines = ["Demo users (demo passwords, never use them elsewhere):"]
        lines += [
            f"  {u['username']:<8} {u['role']:<9} password: {u['password']}"
            for u in result["users"]
        ]
        k = result["knowledge"]
        lines.append(
            f"Knowledge: {len(k['created'])} documents created, {len(k['unchanged'])} unchanged"
        )
        experience = result["experience"]
        created = sum(1 for item in experience["items"] if item["created"])
        lines.append(
            f"Experience: {len(experience['items'])} cases and skills ({created} new), "
            f"{len(result['lessons'])} lessons ({result['conflicts']} conflict); "
            f"revoked later: {result['revoked']}"
        )
        lines.append(
            "Runs: " + ", ".join(result["runs"]["ids"]) + f"; thread {result['thread']['thread']}"
        )
        if result["replay_report"] is not None:
            lines.append(f"Replay report: /evaluation/{result['replay_report']}/")
        if result["url"]:
            lines.append(f"Console: {result['url']}  (admin: {result['url']}admin/)")
        return "\n".join(lines)
