from __future__ import annotations

from argparse import ArgumentParser
from typing import TYPE_CHECKING, Any

from experience.cases import selectors, services
from experience.core import domain
from experience.core.review import Impact, ReviewOutcome, ReviewRefused
from experience.lessons import selectors as lesson_selectors
from experience.review import decisions, revocation
from experience.review import documents as review_documents
from experience.review import impact as impacts
from experience.review import revocation as revocation_
from knowledge.services import document_review_unmet
from reviewconsole import clock
from reviewconsole.cli import CommandRefused, JsonCommand, user_by_name
from reviewconsole.errors import PermissionRefused, ValidationFailure

if TYPE_CHECKING:
    from django.contrib.auth.models import User

OPERATIONS = ("approve", "reject", "revoke", "verify")
EMPTY_IMPACT: dict[str, list[str]] = {"skills": [], "runs": []}


class Command(JsonCommand):
    help = (
        "Review a case, skill, lesson or knowledge document: approve, reject or revoke with a reason "
        "(revoke reports the impact; --preview shows it without revoking), or verify one "
        "evidence item of a case."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("operation", choices=OPERATIONS)
        parser.add_argument("id", metavar="ID", help="case:…, skill:…, lesson:… or doc:KEY@VERSION")
        parser.add_argument("--as", dest="as_user", required=True, metavar="USER")
        parser.add_argument("--reason", default="")
        parser.add_argument("--evidence", metavar="KEY", help="verify: e.g. diagnosis/0")
        parser.add_argument("--note", default="", help="verify: what was checked")
        parser.add_argument(
            "--preview", action="store_true", help="revoke: show the impact, change nothing"
        )

    def execute_json(self, **options: Any) -> dict[str, Any]:
        actor = user_by_name(options["as_user"])
        operation, item_id = options["operation"], options["id"]
        if operation == "verify":
            return self._verify(item_id, options, actor)
        if options["preview"]:
            return self._preview(item_id, operation, options["reason"], actor)
        try:
            outcome = self._review(item_id, operation, options["reason"], actor)
        except ReviewRefused as refusal:
            raise CommandRefused(
                str(refusal),
                {
                    "ok": False,
                    "id": refusal.item_id,
                    "status": refusal.status,
                    "unmet": refusal.unmet,
                    "impact": dict(EMPTY_IMPACT),
                },
            ) from None
        return outcome.as_json()

    def _review(self, item_id: str, operation: str, reason: str, actor: User) -> ReviewOutcome:
        kind = domain.item_type(item_id)
        if kind == "case":
            case = selectors.case_get(item_id, user=actor)
            action = {
                "approve": decisions.case_approve,
                "reject": decisions.case_reject,
                "revoke": revocation.case_revoke,
            }[operation]
            return action(case=case, actor=actor, reason=reason)
        if kind == "skill":
            skill = selectors.skill_get(item_id, user=actor)
            skill_action = {
                "approve": decisions.skill_approve,
                "reject": decisions.skill_reject,
                "revoke": revocation.skill_revoke,
            }[operation]
            return skill_action(skill=skill, actor=actor, reason=reason)
        if kind == "lesson":
            lesson = lesson_selectors.lesson_get(item_id, user=actor)
            lesson_action = {
                "approve": decisions.lesson_approve,
                "reject": decisions.lesson_reject,
                "revoke": revocation_.lesson_revoke,
            }[operation]
            return lesson_action(lesson=lesson, actor=actor, reason=reason)
        if kind == "document":
            document = selectors.document_get(item_id, user=actor)
            if operation == "revoke":
                return review_documents.document_revoke_with_impact(
                    document=document, actor=actor, reason=reason
                )
            if operation == "approve":
                return review_documents.document_approve_reviewed(
                    document=document, actor=actor, reason=reason
                )
            raise ValidationFailure(
                "operation", "knowledge documents are approved or revoked, not rejected"
            )
        raise ValidationFailure("ID", selectors.UNKNOWN_ID)

    def _preview(self, item_id: str, operation: str, reason: str, actor: User) -> dict[str, Any]:
        if operation != "revoke":
            raise ValidationFailure("--preview", "only revoke has an impact preview")
        kind = domain.item_type(item_id)
        if kind == "case":
            status = selectors.case_get(item_id, user=actor).status
        elif kind == "skill":
            status = selectors.skill_get(item_id, user=actor).status
        elif kind == "lesson":
            status = lesson_selectors.lesson_get(item_id, user=actor).status
        elif kind == "document":
            document = selectors.document_get(item_id, user=actor)
            status = document.status
        else:
            raise ValidationFailure("ID", selectors.UNKNOWN_ID)
        if kind == "document":
            unmet = document_review_unmet(
                document=document, actor=actor, reason=reason, approve=False
            )
        else:
            unmet = domain.revocation_unmet(
                status=status, reviewer=selectors.reviewer_of(actor), reason=reason
            )
        return {
            "ok": True,
            "preview": True,
            "id": item_id,
            "status": status,
            "unmet": unmet,
            "impact": impacts.revocation_impact(
                item_id, tenant=document.tenant if kind == "document" else None
            ).as_json(),
        }

    def _verify(self, item_id: str, options: dict[str, Any], actor: User) -> dict[str, Any]:
        key = options.get("evidence")
        if not key:
            raise ValidationFailure(
                "--evidence", "names the evidence item to verify, e.g. diagnosis/0"
            )
        if domain.item_type(item_id) != "case":
            raise ValidationFailure("ID", "only case evidence can be verified")
        case = selectors.case_get(item_id, user=actor)
        try:
            check = services.evidence_check(case=case, key=key, actor=actor, note=options["note"])
        except PermissionRefused as refusal:
            raise CommandRefused(
                refusal.message,
                {
                    "ok": False,
                    "id": case.id,
                    "evidence": key,
                    "unmet": [refusal.unmet],
                    "error": refusal.message,
                },
            ) from None
        return {
            "ok": True,
            "id": case.id,
            "evidence": key,
            "checked_by": actor.get_username(),
            "checked_at": check.checked_at.isoformat()
            if check.checked_at
            else clock.now().isoformat(),
        }

    def render_text(self, result: dict[str, Any]) -> str:
        if "evidence" in result:
            return (
                f"{result['id']}: evidence {result['evidence']} checked by {result['checked_by']}"
            )
        lines = [
            f"{result['id']}: {result['status']}" + (" (preview)" if result.get("preview") else "")
        ]
        if result.get("unmet"):
            lines.append("unmet: " + ", ".join(result["unmet"]))
        impact = Impact.from_json(result.get("impact") or {})
        if impact.reached or result.get("preview"):
            lines.extend(impacts.impact_lines(impact))
        return "\n".join(lines)
