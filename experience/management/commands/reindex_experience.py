from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Count

from experience.index import postings
from experience.index.models import IndexEntry
from reviewconsole.cli import JsonCommand


class Command(JsonCommand):
    help = (
        "Rebuild the experience retrieval index from the approved cases, skills and lessons, "
        "with the confidence inputs each lesson's entry keeps: after a bulk load that bypassed "
        "approvals, or a restore from a backup taken before those inputs were kept. One "
        "transaction: retrieval answers from the old index until the new one commits."
    )

    def execute_json(self, **options: Any) -> dict[str, Any]:
        with transaction.atomic():
            entries = postings.rebuild()
        by_kind = dict(
            IndexEntry.objects.order_by()
            .values_list("kind")
            .annotate(n=Count("pk"))
            .values_list("kind", "n")
        )
        return {"ok": True, "entries": entries, "by_kind": dict(sorted(by_kind.items()))}

    def render_text(self, result: dict[str, Any]) -> str:
        kinds = ", ".join(f"{n} {kind}s" for kind, n in result["by_kind"].items())
        return f"indexed {result['entries']} items ({kinds or 'none'})"
