from __future__ import annotations

from typing import Any

from reviewconsole.audit import audit_verify
from reviewconsole.cli import CommandRefused, JsonCommand


class Command(JsonCommand):
    help = "Recompute the audit hash chain and name the first broken link."

    def execute_json(self, **options: Any) -> dict[str, Any]:
        checked, broken = audit_verify()
        if broken is not None:
            payload = {
                "ok": False,
                "checked": checked,
                "broken_at": broken.event_id,
                "problem": broken.problem,
            }
            raise CommandRefused(f"event {broken.event_id}: {broken.problem}", payload)
        return {"ok": True, "checked": checked, "broken_at": None, "problem": None}

    def render_text(self, result: dict[str, Any]) -> str:
        return f"audit chain intact: {result['checked']} events checked"
