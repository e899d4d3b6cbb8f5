"""The production recipe in docs/operations.md is the one scripts/cluster.py runs, and HAProxy
accepts its configuration."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from scripts.cluster import ROOT, Recipe

OPERATIONS = ROOT / "docs" / "operations.md"


def test_the_documented_commands_and_configuration_are_what_the_script_prints() -> None:
    printed = subprocess.run(  # noqa: S603
        [str(ROOT / ".venv" / "bin" / "python"), "scripts/cluster.py", "--print-config"],
        cwd=ROOT,
        # The documented defaults: no database named in the environment.
        env={k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    commands, configuration = printed.split("\n\n", 1)
    docs = OPERATIONS.read_text(encoding="utf-8")
    assert f"```sh\n{commands}\n```" in docs
    assert f"```haproxy\n{configuration}```" in docs


def test_the_script_runs_what_it_prints() -> None:
    recipe = Recipe()
    script = recipe.script()
    for port in recipe.web_ports:
        assert " ".join(recipe.gunicorn_argv(port)) in script
    for index in range(recipe.workers):
        assert " ".join(recipe.worker_argv(index)) in script
    assert f"bind 127.0.0.1:{recipe.port}" in recipe.haproxy_config()
    assert all(
        f"server web{i + 1} 127.0.0.1:{port} check" in recipe.haproxy_config()
        for i, port in enumerate(recipe.web_ports)
    )


def test_haproxy_accepts_the_configuration(tmp_path: Path) -> None:
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        pytest.skip("haproxy is not installed (scripts/ensure_haproxy.sh installs it)")
    config = tmp_path / "haproxy.cfg"
    config.write_text(Recipe(web=3).haproxy_config(str(tmp_path)))
    checked = subprocess.run(  # noqa: S603
        [haproxy, "-c", "-f", str(config)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
