"""Run ids over HTTP (issue 41.5): a run id the caller already used for an investigation is a
conflict (409), and a run id that names no run of the caller's is unknown (404), as any id;
neither is a malformed body (422)."""

from __future__ import annotations

from typing import Any

import pytest

from experience.review.outcomes import NO_READS
from investigations.services import RUN_ID_TAKEN
from tests.api.conftest import FACTS, KNOWN_AT, OCCURRED_AT, SCOPE, BearerClient, Demo

pytestmark = pytest.mark.django_db


def _ticket(run_id: str) -> dict[str, Any]:
    return {
        "text": "小程序优惠券无法使用",
        "scope": dict(SCOPE),
        "occurred_at": OCCURRED_AT,
        "known_at": KNOWN_AT,
        "facts": dict(FACTS),
        "run_id": run_id,
    }


def test_a_reused_run_id_is_409(agent_client: BearerClient, demo: Demo) -> None:
    first = agent_client.post_json("/api/v1/investigations", _ticket("inv-reused"))
    assert first.status_code == 200, first.content
    again = agent_client.post_json("/api/v1/investigations", _ticket("inv-reused"))
    assert again.status_code == 409, again.content
    assert again.json() == {"detail": RUN_ID_TAKEN}


def test_an_unknown_run_is_404(agent_client: BearerClient, demo: Demo) -> None:
    outcome = agent_client.post_json("/api/v1/runs/no-such-run/outcome", {"outcome": "unresolved"})
    assert outcome.status_code == 404, outcome.content
    assert outcome.json() == {"detail": NO_READS}
    # An investigation the caller never started is 404 too (it always was).
    assert agent_client.get("/api/v1/investigations/no-such-run").status_code == 404


def test_the_schema_declares_both_codes(agent_client: BearerClient) -> None:
    paths = agent_client.get("/api/v1/openapi.json").json()["paths"]
    assert "409" in paths["/api/v1/investigations"]["post"]["responses"]
    assert "404" in paths["/api/v1/runs/{run_id}/outcome"]["post"]["responses"]
