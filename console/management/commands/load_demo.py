from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from experience.demo import load_demo_experience
from knowledge.services import documents_import
from reviewconsole.cli import JsonCommand, read_json_file
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role

# Demo accounts only: anyone who reads this file knows these passwords.
DEMO_USERS = (
    ("rita", Role.REVIEWER, "demo-rita-reviews"),
    ("ravi", Role.REVIEWER, "demo-ravi-reviews"),
    ("olivia", Role.OPERATOR, "demo-olivia-operates"),
    ("ada", Role.ADMIN, "demo-ada-audits"),
    ("agent-7", Role.AGENT, "demo-agent-7-searches"),
)


class Command(JsonCommand):
    help = "Create the demo users and load the demo knowledge and experience fixtures (idempotent)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--fixtures", default=str(Path(settings.BASE_DIR) / "fixtures"))

    @transaction.atomic
    def execute_json(self, **options: Any) -> dict[str, Any]:
        users = {
            name: user_set_role(username=name, role=role, password=password)
            for name, role, password in DEMO_USERS
        }
        knowledge = documents_import(
            items=read_json_file(str(Path(options["fixtures"]) / "knowledge.json")),
            actor=users["olivia"],
        )
        experience = load_demo_experience(operator=users["olivia"], reviewer=users["rita"])
        return {
            "users": [
                {"username": name, "role": str(role), "password": password}
                for name, role, password in DEMO_USERS
            ],
            "knowledge": {"created": knowledge.created, "unchanged": knowledge.unchanged},
            "experience": experience,
        }

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
            f"Experience: {len(experience['items'])} cases and skills ({created} new); "
            f"{len(experience['approved'])} approved, "
            f"{len(experience['candidates'])} candidates waiting in the review queue"
        )
        lines.append("Console: http://127.0.0.1:8000/  (admin: http://127.0.0.1:8000/admin/)")
        return "\n".join(lines)
