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
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "AUDIT_"))}
    return subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


SECRET_KEY = "k" * 10 + "Zq8#pW2!xR5@mN7$vB4%cL9^tH3&jF6*gD1(sA0)eY"


def production(tmp_path: Path, **env: str) -> dict[str, str]:
    """The environment production settings need, with ``env`` over it (a value "" removes)."""
    complete = {
        "DJANGO_SETTINGS_MODULE": "console.settings_production",
        "DJANGO_SECRET_KEY": SECRET_KEY,
        "DJANGO_ALLOWED_HOSTS": "console.example",
        "AUDIT_HMAC_KEY": "a3f1" * 16,
        "AUDIT_ANCHOR_FILE": str(tmp_path / "anchor.jsonl"),
    }
    return {k: v for k, v in {**complete, **env}.items() if v}


def test_production_settings_pass_check_deploy(tmp_path: Path) -> None:
    result = run_manage("check", "--deploy", "--fail-level", "WARNING", **production(tmp_path))
    assert result.returncode == 0, result.stderr + result.stdout
    assert "no issues" in result.stdout


def test_production_settings_refuse_the_development_key() -> None:
    result = run_manage("check", DJANGO_SETTINGS_MODULE="console.settings_production")
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_production_settings_refuse_a_trusted_proxy_that_is_not_an_address(tmp_path: Path) -> None:
    result = run_manage(
        "check",
        **production(tmp_path, CONSOLE_TRUSTED_PROXIES="127.0.0.1, balancer.internal"),
    )
    assert result.returncode != 0
    assert "CONSOLE_TRUSTED_PROXIES: 'balancer.internal'" in result.stderr


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DJANGO_SECRET_KEY", "short"),
        ("DJANGO_SECRET_KEY", "ab" * 40),  # long, but five characters it has not
        ("DJANGO_SECRET_KEY", "django-insecure-" + SECRET_KEY),
        ("AUDIT_HMAC_KEY", ""),
        ("AUDIT_HMAC_KEY", "short"),
        ("AUDIT_HMAC_KEY", SECRET_KEY),  # the secret key again: not a key of its own
        ("AUDIT_ANCHOR_FILE", ""),
        ("AUDIT_ANCHOR_FILE", "/nonexistent-folder/anchor.jsonl"),
    ],
)
def test_production_settings_refuse_to_start_without_their_audit_keys_and_anchor(
    tmp_path: Path, variable: str, value: str
) -> None:
    result = run_manage("check", **production(tmp_path, **{variable: value}))

    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert variable in result.stderr.strip().splitlines()[-1]
