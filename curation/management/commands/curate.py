from __future__ import annotations

from argparse import ArgumentParser
from typing import Any

from curation.scan import curation_scan, stale_after_days
from reviewconsole.cli import JsonCommand
from reviewconsole.errors import ValidationFailure
from reviewconsole.timeparse import parse_aware_datetime


class Command(JsonCommand):
    help = (
        "Scan approved memory: queue stale cases and skills for re-review (unused for "
        "CURATION_STALE_AFTER_DAYS days, or citing a knowledge document that has a newer "
        "version or was revoked) and propose skills for check patterns shared by approved "
        "cases of at least two distinct incidents. Prints what entered the queues."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--now", metavar="ISO", help="scan as of this time (tz-aware)")
        parser.add_argument("--days", type=int, metavar="N", help="override the staleness window")

    def execute_json(self, **options: Any) -> dict[str, Any]:
        now = parse_aware_datetime(options["now"], field="--now") if options.get("now") else None
        days = options.get("days")
        if days is not None and days < 1:
            raise ValidationFailure("--days", "must be a positive number of days")
        report = curation_scan(now=now, days=days)
        return {"ok": True, "stale_after_days": days or stale_after_days(), **report.as_json()}

    def render_text(self, result: dict[str, Any]) -> str:
        lines = [f"staleness window: {result['stale_after_days']} days"]
        for entry in result["rereview"]:
            about = f" ({entry['document_id']} → {entry['detail']})" if entry["document_id"] else ""
            lines.append(f"re-review  {entry['item_id']}  {entry['reason']}{about}")
        for entry in result["closed"]:
            lines.append(f"closed     {entry['item_id']}  {entry['resolution']}")
        for proposal in result["proposals"]:
            pattern = proposal["pattern"]
            lines.append(
                f"proposal   #{proposal['id']}  {pattern['kind']}={pattern['value']}  "
                f"{len(proposal['incidents'])} incidents, {len(proposal['cases'])} cases"
            )
        for link in result["near_duplicates"]:
            lines.append(f"similar    {' ~ '.join(link['cases'])}")
        if len(lines) == 1:
            lines.append("nothing entered the queues")
        return "\n".join(lines)
