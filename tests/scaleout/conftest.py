"""One deployment of the production recipe (scripts/cluster.py) for every test of this folder
that needs one, started once: 3 gunicorn instances and 1 MCP server behind HAProxy, 2 workers,
one PostgreSQL database of its own, the demo world loaded. Its tests are one xdist group
(``--dist loadgroup``), so a run starts it once, on one pytest worker, and stops it after them.

It needs Debian's HAProxy (scripts/ensure_haproxy.sh installs it; ``make test`` runs that first)
and PostgreSQL: without either its tests are skipped, and fail when CI is set. They run in the
PostgreSQL half of the suite, beside the test database.
"""

from __future__ import annotations

import os
import shutil
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from scripts.cluster import Cluster, database_drop, running
from scripts.scaleout import ENVIRONMENT, load_demo, recipe_on_free_ports

POSTGRES = ("postgres://", "postgresql://")
# Every test using ``deployment`` carries it: one pytest worker runs them all.
GROUP = pytest.mark.xdist_group("cluster")


@dataclass
class Deployment:
    cluster: Cluster
    demo: dict[str, Any]  # what load_demo --json answered


@pytest.fixture(scope="package")
def database() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(POSTGRES):
        pytest.skip("runs in the PostgreSQL half of the suite (DATABASE_URL=postgres://…)")
    if shutil.which("haproxy") is None:
        if os.environ.get("CI"):
            pytest.fail("haproxy is required in CI; scripts/ensure_haproxy.sh installs it")
        pytest.skip(
            "haproxy is not installed (scripts/ensure_haproxy.sh installs it); CI runs this"
        )
    parsed = urllib.parse.urlsplit(url)
    name = f"{parsed.path.lstrip('/')}_scaleout_{os.getpid()}"
    return urllib.parse.urlunsplit(parsed._replace(path=f"/{name}"))


@pytest.fixture(scope="package")
def deployment(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    database_drop(database)
    recipe = recipe_on_free_ports(database=database, web=3, workers=2, processes=1, mcp=1)
    try:
        with running(recipe, tmp_path_factory.mktemp("cluster"), ENVIRONMENT) as cluster:
            yield Deployment(cluster, load_demo(cluster))
    finally:
        database_drop(database)
