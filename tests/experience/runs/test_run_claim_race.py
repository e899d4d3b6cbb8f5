"""Simultaneous first reads under one run id, with real threads on real connections: each
account and tenant gets one run of its own, never an error, never a run shared (SQLite file and
PostgreSQL alike)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User

from experience.runs.claims import run_claim
from experience.runs.models import RunOwner
from reviewconsole import clock
from reviewconsole.roles import Role
from tests.experience.cases.test_concurrency import in_threads

pytestmark = pytest.mark.django_db(transaction=True)

TENANTS = ("teahouse", "other-tenant")


def test_one_run_id_opened_at_once_by_accounts_in_tenants_is_one_run_each(
    make_user: Callable[[str, str], User],
) -> None:
    agents = [make_user(f"agent-{n}", Role.AGENT) for n in range(3)]
    # Every (account, tenant) pair twice: 12 claims released together.
    pairs = [(agent, tenant) for agent in agents for tenant in TENANTS] * 2
    at = clock.now()

    results = in_threads(
        len(pairs),
        lambda i: run_claim(run_id="shared", actor=pairs[i][0], tenant=pairs[i][1], at=at).run_id,
    )

    assert not [r for r in results if isinstance(r, Exception)], results
    runs = list(RunOwner.objects.filter(name="shared").values_list("owner", "tenant", "run_id"))
    assert sorted((owner, tenant) for owner, tenant, _ in runs) == sorted(
        {(agent.pk, tenant) for agent, tenant in pairs}
    )
    stored = {(owner, tenant): run_id for owner, tenant, run_id in runs}
    # Both claims of one pair got that pair's run; each run has a stored id of its own.
    assert [stored[(a.pk, t)] for a, t in pairs] == results
    assert len(set(stored.values())) == len(stored)
    assert sum(run_id == "shared" for run_id in stored.values()) == 1
