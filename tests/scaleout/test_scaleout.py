"""The scale-out test in its reduced form (issue 29, item 5): the production recipe of
scripts/cluster.py (3 gunicorn instances behind HAProxy, 2 workers, one PostgreSQL; the
deployment of conftest.py) under 20 simulated users making 12 requests each, one instance and
one worker killed with SIGKILL once 40% of the requests were answered. The full run (200 users)
is ``scripts/scaleout.py``.

It kills part of the deployment the folder's tests share: the tests that need it whole
(test_agent_clients.py) run before it.
"""

from __future__ import annotations

from scripts.scaleout import load
from tests.scaleout.conftest import GROUP, Deployment

pytestmark = GROUP


def test_three_instances_and_two_workers_survive_losing_one_of_each(
    deployment: Deployment,
) -> None:
    report = load(
        deployment.cluster,
        users=20,
        requests=12,
        pause_ms=(200, 600),
        kill_at=0.4,
        agent_accounts=2,
        demo=deployment.demo,
    )
    print(report.text())

    # Something of each kind was written, so the checks below check something.
    assert report.accepted["cases"] > 0
    assert report.accepted["approvals"] > 0
    assert report.accepted["outcomes"] > 0
    assert "killed" in report.figures
    # Only requests the killed instance held failed (writes it had received, reads whose answer
    # it had begun), at most as many as it had threads: every other read, and every request
    # after the balancer took the instance out, was answered.
    assert report.errors == []
    assert len(report.errors_allowed) <= 1 * 4
    # Every accepted write present once, every task finished once, the audit chain intact.
    assert report.checks and all(report.checks.values()), report.text()
    assert report.requests >= 20 * 12
