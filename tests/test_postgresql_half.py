"""The PostgreSQL half's selection (tests/postgresql_half.py) held to the code: every production
module with engine-specific code names the tests that exercise it, and those tests run there."""

from __future__ import annotations

from tests import postgresql_half
from tests.postgresql_half import ENGINE_CODE, ROOT


def test_every_engine_specific_production_module_names_its_tests() -> None:
    found = postgresql_half.engine_specific_production_modules()
    missing = sorted(found - set(ENGINE_CODE))
    assert not missing, (
        f"{missing} hold engine-specific code (tests/postgresql_half.py, PRODUCTION_SOURCE): "
        "name in ENGINE_CODE the test modules that exercise it, so the PostgreSQL half runs them"
    )
    stale = sorted(set(ENGINE_CODE) - found)
    assert not stale, f"{stale} no longer hold engine-specific code: drop them from ENGINE_CODE"


def test_the_named_test_modules_exist_and_run_on_postgresql() -> None:
    for module in sorted(postgresql_half.engine_modules()):
        path = ROOT / module
        assert path.is_file(), f"ENGINE_CODE names {module}, which does not exist"
        assert postgresql_half.runs_on_postgresql(path)


def test_a_module_naming_the_engine_runs_on_postgresql() -> None:
    folder = ROOT / "tests"
    chosen = [
        path.relative_to(ROOT).as_posix()
        for path in folder.rglob("test_*.py")
        if postgresql_half.runs_on_postgresql(path)
    ]
    assert "tests/reviewconsole/test_audit_guard_roles.py" in chosen  # names the vendor
    assert "tests/scaleout/test_scaleout.py" in chosen  # ENGINE_FOLDERS
    assert "tests/ui/test_templates.py" not in chosen  # pages render alike on both engines
