"""Every bench script runs at its tiny scale (``--tiny``), so a change that breaks one (a
renamed function it calls, a column its bulk insert misses, a seam that no longer holds: see
bench/seams.py) fails the suite instead of the next person who measures.

Each runs in a process of its own, as a person runs it, and must exit 0 and print its figures in
their shape: the rows of its table and its ratios, as numbers. The figures themselves mean
nothing at this scale and are not checked. Scratch databases are copies of a migrated template
(``BENCH_SQLITE_TEMPLATE``, ``BENCH_POSTGRES_TEMPLATE``: bench/common.py), and every temporary
file goes under the test's own folder. The scripts that take ``--database postgres`` run on
PostgreSQL in the PostgreSQL half of the suite, on the test server; bench_scaleout.py's arms run
against the scale-out tests' deployment (tests/scaleout/test_bench_scaleout.py).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import ROOT, made_once

NUMBER = r"[-+]?\d[\d,]*(?:\.\d+)?"
TIMEOUT = 600


def run_bench(script: str, *args: str, tmp_path: Path, **env: str) -> str:
    """``bench/SCRIPT ARGS`` in a process of its own; its output, once it exited 0."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE")
    }
    environment.update(TMPDIR=str(tmp_path), PYTHONUNBUFFERED="1", **env)
    done = subprocess.run(  # noqa: S603 - this interpreter and a bench script, fixed arguments
        [sys.executable, f"bench/{script}", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"{script} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def figures(output: str, pattern: str) -> list[tuple[str, ...]]:
    """Every match of ``pattern`` (a line of the output, its figures as groups)."""
    found = re.findall(pattern, output, flags=re.MULTILINE)
    assert found, f"no line like {pattern!r} in:\n{output}"
    return [(match,) if isinstance(match, str) else tuple(match) for match in found]


def number(text: str) -> float:
    return float(text.replace(",", ""))


# --- what each script prints ---------------------------------------------------------------------


def check_api(output: str, *, postgres: bool) -> None:
    database_cpus = []
    for endpoint in ("GET /api/v1/ping", r"POST /api/v1/knowledge/search"):
        database = rf" \+ database ({NUMBER})" if postgres else "()"
        ((completed, rate, cpu, database_cpu, errors),) = figures(
            output,
            rf"^{endpoint}\s+(\d+) req\s+({NUMBER}) req/s\s+p50\s+{NUMBER} ms\s+p99\s+{NUMBER} ms"
            rf"\s+CPU\s+({NUMBER}) ms/req{database}\s+errors (\d+)",
        )
        assert int(completed) == 40 and int(errors) == 0
        assert number(rate) > 0 and number(cpu) > 0
        database_cpus.append(number(database_cpu) if postgres else 0.0)
    # The backends' CPU is read in clock ticks (10 ms): a tiny run's 40 pings may not reach one,
    # but its pings and searches together do.
    assert not postgres or sum(database_cpus) > 0
    figures(output, rf"^throughput ratio search/ping: ({NUMBER})")
    figures(output, rf"^CPU per request ratio search/ping: ({NUMBER})")
    ((compiled, former, ratio),) = figures(
        output,
        rf"^token authentication in-process .*compiled statement p50 ({NUMBER}) ms, "
        rf"former code ({NUMBER}) ms, ratio ({NUMBER})",
    )
    assert number(compiled) > 0 and number(former) > 0 and number(ratio) > 0
    assert "console.settings_production, gunicorn --preload" in output


def check_knowledge(output: str) -> None:
    rows = figures(output, rf"^\s+(\d+) │\s+({NUMBER}) ms\s+({NUMBER}) │\s+({NUMBER}) │")
    assert [int(row[0]) for row in rows] == [20, 50]
    # The corpus is built as the benchmark says: the gate admits each scope's size exactly.
    assert "WARNING: the gate admitted" not in output, output


def check_semantic(output: str) -> None:
    figures(output, rf"paraphrase recall@4 gain: ({NUMBER}) points")
    figures(output, rf"exact-wording recall@4 change: ({NUMBER}) points")
    sizes = figures(output, r"^  (\d+) items in one scope")
    assert [int(size[0]) for size in sizes] == [20, 50]
    assert len(figures(output, rf"^    (search|retrieve)\s+lexical\s+({NUMBER}) /")) == 4


def check_load(output: str) -> None:
    rows = figures(
        output, rf"^(reviewer|agent|all)\s+(\d+)\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})\s+(\d+)$"
    )
    assert [row[0] for row in rows] == ["reviewer", "agent", "all"]
    assert all(int(row[5]) == 0 for row in rows), output


# --- SQLite: every script ----------------------------------------------------------------------


@pytest.fixture
def on_sqlite(migrated_sqlite: Path) -> dict[str, str]:
    """The environment of a SQLite run: copies of the migrated file (``migrated_sqlite`` is a
    SQLite file of the suite's own, so these run in the SQLite half only)."""
    return {"BENCH_SQLITE_TEMPLATE": str(migrated_sqlite)}


def test_bench_api(on_sqlite: dict[str, str], tmp_path: Path) -> None:
    output = run_bench(
        "bench_api.py", "--tiny", "--generator", "python", tmp_path=tmp_path, **on_sqlite
    )
    check_api(output, postgres=False)


def test_bench_experience(on_sqlite: dict[str, str], tmp_path: Path) -> None:
    output = run_bench("bench_experience.py", "--tiny", tmp_path=tmp_path, **on_sqlite)
    figures(output, rf"^retrieval with lessons / without: p50 x({NUMBER})")
    figures(output, rf"^  without outcome lookups / without lessons: p50 x({NUMBER})")
    assert len(figures(output, rf"^impact / bare lookup \((typical|hot)\): p50 x({NUMBER})")) == 2
    assert len(figures(output, rf"^  context block / retrieve \(common query\) x({NUMBER})")) == 2
    gains = figures(output, rf"^(.+?)\s+({NUMBER})\s+({NUMBER})  gain x({NUMBER})$")
    assert len(gains) == 6


def check_indexing(output: str) -> None:
    for index in ("lexical", "vector"):
        figures(output, rf"^{index} addition ratio 200/20: x({NUMBER}) \(target <= 1.3\)")
    rows = figures(
        output,
        rf"^reader after one addition at ({NUMBER}): lexical ({NUMBER}) bytes \((\d+) delta rows\),"
        rf" vector ({NUMBER}) bytes \((\d+) delta rows\)",
    )
    assert [row[0] for row in rows] == ["20", "200"]
    # After one addition the vector reader fetches one delta row, never the matrix.
    assert all(int(row[4]) == 1 for row in rows), output
    assert len(figures(output, rf"^merge at ({NUMBER}): lexical ({NUMBER}) ms")) == 2
    # Knowledge search's lexical index: one approved version at each size, the reader after it.
    figures(output, rf"^knowledge lexical addition ratio 200/20: x({NUMBER}) \(target <= 1.3\)")
    knowledge = figures(
        output,
        rf"^knowledge addition at ({NUMBER}): ({NUMBER}) ms; reader after it ({NUMBER}) bytes"
        rf" \((\d+) delta rows\)",
    )
    assert [row[0] for row in knowledge] == ["20", "200"]
    assert len(figures(output, rf"^knowledge merge at ({NUMBER}): ({NUMBER}) ms")) == 2


def test_bench_indexing(on_sqlite: dict[str, str], tmp_path: Path) -> None:
    output = run_bench("bench_indexing.py", "--tiny", tmp_path=tmp_path, **on_sqlite)
    check_indexing(output)


def test_bench_investigations(on_sqlite: dict[str, str], tmp_path: Path) -> None:
    output = run_bench("bench_investigations.py", "--tiny", tmp_path=tmp_path, **on_sqlite)
    rows = figures(output, rf"^(direct|runner|service)\s+({NUMBER})\s+({NUMBER})$")
    assert [row[0] for row in rows] == ["direct", "runner", "service"]
    figures(output, rf"^runner/direct ({NUMBER}) \(target")


def test_bench_knowledge(on_sqlite: dict[str, str], tmp_path: Path) -> None:
    output = run_bench("bench_knowledge.py", "--tiny", tmp_path=tmp_path, **on_sqlite)
    check_knowledge(output)
    assert "FTS5" in output


def test_bench_scale(on_sqlite: dict[str, str], tmp_path: Path) -> None:
    output = run_bench("bench_scale.py", "--tiny", tmp_path=tmp_path, **on_sqlite)
    figures(output, rf"^indexing: ({NUMBER}) documents .* ({NUMBER}) documents/s$")
    figures(output, rf"^indexing: ({NUMBER}) cases inserted .* \(({NUMBER}) per CPU second\)$")
    rows = figures(output, rf"^\s+(\d+) │\s+({NUMBER})\s+({NUMBER}) │\s+({NUMBER})\s+({NUMBER}) │")
    # Both tables (search, then retrieval), each at both sizes.
    assert [int(row[0]) for row in rows] == [20, 40, 20, 40]
    growth = figures(output, rf"^  growth per doubling, (wall|CPU): ×({NUMBER}) ")
    assert len(growth) == 4
    assert len(figures(output, rf"^\s+(\d+): ({NUMBER}) / ({NUMBER})$")) == 2
    assert "WARNING: the gate admitted" not in output, output


def test_bench_learning(on_sqlite: dict[str, str], tmp_path: Path) -> None:
    output = run_bench("bench_learning.py", "--tiny", tmp_path=tmp_path, **on_sqlite)
    rows = figures(output, rf"^\s+(\d+)\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})\s")
    assert [int(row[0]) for row in rows] == [10, 20]
    figures(output, rf"^context block, .*: p50 ({NUMBER}) ms, p95 ({NUMBER}) ms")


@pytest.mark.sqlite_half
def test_bench_merges(tmp_path: Path) -> None:
    """No database; the tokens' hashed vectors stand in for the model."""
    report = json.loads(run_bench("bench_merges.py", "--tiny", "--json", tmp_path=tmp_path))
    for table in ("former cosine >= 0.92", "rule, no lexicon", "rule, lexicon"):
        assert set(report[table]) == {"en-en", "zh-zh", "en-zh", "all"}
        assert 0 <= report[table]["all"]["recall"] <= 1
    assert report["pairs"] > 0 and len(report["alone held out by topic: thresholds"]) == 6


def test_bench_semantic(on_sqlite: dict[str, str], tmp_path: Path) -> None:
    output = run_bench("bench_semantic.py", "--tiny", tmp_path=tmp_path, **on_sqlite)
    check_semantic(output)


@pytest.mark.sqlite_half
def test_bench_textsearch(tmp_path: Path) -> None:
    """No database: rankings over generated arrays."""
    output = run_bench("bench_textsearch.py", "--tiny", tmp_path=tmp_path)
    rows = figures(output, rf"^(.+?)\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})x$")
    assert len(rows) == 5


def test_load_test(on_sqlite: dict[str, str], tmp_path: Path) -> None:
    output = run_bench(
        "load_test.py", "--database", "sqlite", "--tiny", tmp_path=tmp_path, **on_sqlite
    )
    check_load(output)


# --- PostgreSQL: the scripts that take --database postgres ----------------------------------------


@pytest.fixture(scope="session")
def postgres_template(shared_folder: Path) -> Iterator[str]:
    """A migrated database on the test server, made once per run for every pytest worker, that
    the scripts' scratch databases are created from."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        pytest.skip("runs in the PostgreSQL half of the suite (DATABASE_URL=postgres://…)")
    import psycopg

    parsed = urllib.parse.urlsplit(url)
    # Made again by each run (dropped first), and left on the server as pytest-django leaves
    # its test databases: the last worker to use it cannot know it is the last.
    name = f"{parsed.path.lstrip('/')}_bench_template"
    admin = urllib.parse.urlunsplit(parsed._replace(path="/postgres"))

    def migrate(building: Path) -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        done = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
            cwd=ROOT,
            env={
                **os.environ,
                "DATABASE_URL": urllib.parse.urlunsplit(parsed._replace(path=f"/{name}")),
            },
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert done.returncode == 0, done.stderr + done.stdout
        building.write_text(name)

    made_once(shared_folder / "bench-postgres-template", migrate)
    yield name


@pytest.fixture
def on_postgres(postgres_template: str) -> dict[str, str]:
    return {"BENCH_POSTGRES_TEMPLATE": postgres_template}


def server_url() -> str:
    parsed = urllib.parse.urlsplit(os.environ["DATABASE_URL"])
    return urllib.parse.urlunsplit(parsed._replace(path=""))


def test_bench_api_on_postgres(on_postgres: dict[str, str], tmp_path: Path) -> None:
    output = run_bench(
        "bench_api.py", "--tiny", "--generator", "python", "--database", "postgres",
        "--postgres-server", server_url(), tmp_path=tmp_path, **on_postgres,
    )  # fmt: skip
    check_api(output, postgres=True)


def test_bench_knowledge_on_postgres(on_postgres: dict[str, str], tmp_path: Path) -> None:
    output = run_bench(
        "bench_knowledge.py", "--tiny", "--database", "postgres",
        "--postgres-url", server_url() + "/postgres", tmp_path=tmp_path, **on_postgres,
    )  # fmt: skip
    check_knowledge(output)


def test_bench_indexing_on_postgres(on_postgres: dict[str, str], tmp_path: Path) -> None:
    output = run_bench(
        "bench_indexing.py", "--tiny", "--database", "postgres",
        "--postgres-url", server_url() + "/postgres", tmp_path=tmp_path, **on_postgres,
    )  # fmt: skip
    check_indexing(output)
    # PostgreSQL keeps the merged array: one addition sends one delta record, never the array.
    rows = figures(output, rf"^reader after one addition at ({NUMBER}): lexical ({NUMBER}) bytes")
    assert number(rows[1][1]) < 41 * 200 / 4, output
    # So does knowledge search's: one delta row, one record, never the array.
    knowledge = figures(
        output, rf"^knowledge addition at ({NUMBER}): .* ({NUMBER}) bytes \((\d+) delta rows\)"
    )
    assert all(int(row[2]) == 1 and number(row[1]) < 200 for row in knowledge), output


def test_bench_semantic_on_postgres(on_postgres: dict[str, str], tmp_path: Path) -> None:
    output = run_bench(
        "bench_semantic.py", "--tiny", "--database", "postgres",
        "--postgres-url", server_url() + "/postgres", tmp_path=tmp_path, **on_postgres,
    )  # fmt: skip
    check_semantic(output)


def test_load_test_on_postgres(on_postgres: dict[str, str], tmp_path: Path) -> None:
    output = run_bench(
        "load_test.py", "--database", "postgres", "--postgres-server", server_url(), "--tiny",
        tmp_path=tmp_path, **on_postgres,
    )  # fmt: skip
    check_load(output)
