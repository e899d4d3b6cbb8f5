"""bench/bench_scaleout.py at its tiny scale (``--tiny``), against this folder's deployment: its
arms take instances out of HAProxy's rotation and put them back, search through the balancer
and read every group's CPU time, and its table prints, so a change that breaks the benchmark
fails the suite (tests/bench/test_bench_scripts.py runs the other scripts).

The script started on its own starts a deployment of its own (minutes: PostgreSQL migrations,
three instances, the demo world); here its arms run in this process on the deployment the
scale-out tests share, which already holds the demo world. The 200-user part is
scripts/scaleout.py's run, which tests/scaleout/test_scaleout.py covers.
"""

from __future__ import annotations

import json
import re

import pytest

from bench import bench_scaleout
from tests.scaleout.conftest import GROUP, Deployment

pytestmark = GROUP

NUMBER = r"\d+(?:\.\d+)?"


def test_the_arms_measure_one_two_and_three_instances(
    deployment: Deployment, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = deployment.cluster
    token = json.loads(cluster.manage("create_token", "agent-7", "--json").stdout)["token"]
    args = bench_scaleout.parse_args(["--tiny"])

    arms = bench_scaleout.throughput_on(cluster, token, args)
    bench_scaleout.print_throughput(arms, args)

    assert [arm.instances for arm in arms] == [1, 2, 3]
    assert all(arm.errors == 0 and arm.rates and arm.rates[0] > 0 for arm in arms)
    assert all(arm.cpu["instances"] > 0 for arm in arms)
    output = capsys.readouterr().out
    rows = re.findall(
        rf"^\s+([123])\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})\s+0  "
        rf"({NUMBER}) / ({NUMBER}) / ({NUMBER}) / ({NUMBER})",
        output,
        flags=re.MULTILINE,
    )
    assert [row[0] for row in rows] == ["1", "2", "3"], output
    assert len(re.findall(r"^\d -> \d instances: x", output, flags=re.MULTILINE)) == 2
    # Every instance is back in the rotation for the tests after this one.
    lines = bench_scaleout.haproxy_command(cluster, "show stat").splitlines()
    header = lines[0].lstrip("# ").split(",")
    status = {
        row[1]: row[header.index("status")]
        for row in (line.split(",") for line in lines[1:])
        if len(row) > 1 and row[0] == "web" and row[1].startswith("web")
    }
    assert len(status) == 3 and not any(value.startswith("MAINT") for value in status.values())
