"""The actor of an investigation owns its run id: they may report its outcome; others may not."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import pytest
from django.contrib.auth.models import User

from experience.review.outcomes import NO_READS, run_outcome_report
from experience.runs.models import Reference
from investigations.services import investigation_run
from reviewconsole.errors import ValidationFailure
from reviewconsole.roles import Role
from tests.investigations.conftest import AT, KNOWN, TICKET

pytestmark = pytest.mark.django_db

SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}


def test_investigation_actor_reports_the_outcome(
    knowledge_base: None, agent: User, make_user: Callable[[str, str], User]
) -> None:
    investigation_run(
        actor=agent,
        text=TICKET,
        scope=SCOPE,
        occurred_at=datetime.fromisoformat(AT),
        known_at=datetime.fromisoformat(KNOWN),
        facts={"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200},
        run_id="inv-owned",
    )
    assert Reference.objects.filter(run_id="inv-owned").exists()
    stranger = make_user("agent-other", Role.AGENT)
    # Another account's run answers as an unknown one.
    with pytest.raises(ValidationFailure) as refused:
        run_outcome_report(run_id="inv-owned", outcome="resolved_by_lead", actor=stranger)
    assert (refused.value.field, refused.value.message) == ("run_id", NO_READS)
    result = run_outcome_report(
        run_id="inv-owned", outcome="resolved_by_lead", actor=agent
    ).as_json()
    assert result["outcome"] == "resolved_by_lead"
