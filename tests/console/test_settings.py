"""Settings: SQLite tuning, DATABASE_URL, and a production module that passes check --deploy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.settings import SQLITE_OPTIONS, database_from_environment

ROOT = Path(__file__).resolve().parents[2]


def test_default_database_is_the_project_sqlite_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    config = database_from_environment()
    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert Path(config["NAME"]) == ROOT / "db.sqlite3"
    assert config["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert "journal_mode=WAL" in config["OPTIONS"]["init_command"]
    assert config["OPTIONS"]["timeout"] > 0


def test_database_url_selects_postgresql(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://u@db.example:5432/console")
    config = database_from_environment()
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["HOST"], config["NAME"]) == ("db.example", "console")


def test_sqlite_url_keeps_the_sqlite_tuning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "sqlite:////var/data/console.sqlite3")
    config = database_from_environment()
    assert config["NAME"] == "/var/data/console.sqlite3"
    assert config["OPTIONS"] == SQLITE_OPTIONS


def run_manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_production_settings_pass_check_deploy() -> None:
    result = run_manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SETTINGS_MODULE="console.settings_production",
        DJANGO_SECRET_KEY="k" * 10 + "Zq8#pW2!xR5@mN7$vB4%cL9^tH3&jF6*gD1(sA0)eY",
        DJANGO_ALLOWED_HOSTS="console.example",
    )
    assert result.returncode == 0, result.stderr + result.stdout
    assert "no issues" in result.stdout


def test_production_settings_refuse_the_development_key() -> None:
    result = run_manage("check", DJANGO_SETTINGS_MODULE="console.settings_production")
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_production_settings_refuse_a_trusted_proxy_that_is_not_an_address() -> None:
    result = run_manage(
        "check",
        DJANGO_SETTINGS_MODULE="console.settings_production",
        DJANGO_SECRET_KEY="k" * 10 + "Zq8#pW2!xR5@mN7$vB4%cL9^tH3&jF6*gD1(sA0)eY",
        DJANGO_ALLOWED_HOSTS="console.example",
        CONSOLE_TRUSTED_PROXIES="127.0.0.1, balancer.internal",
    )
    assert result.returncode != 0
    assert "CONSOLE_TRUSTED_PROXIES: 'balancer.internal'" in result.stderr
