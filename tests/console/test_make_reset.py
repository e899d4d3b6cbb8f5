"""``make reset`` puts the demo back without deleting the virtualenv (issue 39, item 19): it
deletes the project's SQLite file only, then migrates and loads the demo again; the README's
quick start names it."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from django.conf import settings

ROOT = settings.BASE_DIR


def dry_run(target: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = subprocess.run(  # noqa: S603
        ["make", "-n", target],  # noqa: S607 - make from PATH, as a newcomer runs it
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_reset_deletes_the_database_and_loads_the_demo_but_keeps_the_virtualenv() -> None:
    lines = dry_run("reset")
    removals = [line for line in lines if line.startswith("rm ")]
    assert removals == ["rm -f db.sqlite3 db.sqlite3-wal db.sqlite3-shm"]
    assert not any(".venv" in line and line.startswith("rm") for line in lines)
    assert any("manage.py migrate --noinput" in line for line in lines)
    assert any("manage.py load_demo" in line for line in lines)
    # A DATABASE_URL naming another database is refused, not reset.
    assert any("DATABASE_URL" in line and "exit 1" in line for line in lines)


def test_the_quick_start_says_how_to_stop_and_reset() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quick = readme[
        readme.index("## Quick start") : readme.index("\n## ", readme.index("## Quick start") + 1)
    ]
    assert "make reset" in quick
    assert "**Stop**" in quick
