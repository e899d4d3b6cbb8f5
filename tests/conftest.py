"""Shared fixtures: one user per role, a movable clock, and migrated SQLite files."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from datetime import datetime
from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from reviewconsole import clock
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests import postgresql_half
from tests.helpers import (
    FIXTURE_TENANTS,
    audit_guards_lifted,
    copy_database,
    json_made_once,
    migrated_sqlite_template,
    tenants_exist,
)

PASSWORD = "correct-horse-battery-staple"

# Tests that use these fixtures work on SQLite files of their own through ``manage.py``
# processes, whatever the test database is: the PostgreSQL half of ``make test`` would repeat
# them unchanged, so they run in the SQLite half only.
OWN_SQLITE_FILES = frozenset({"migrated_sqlite", "sqlite_database"})


def _on_postgresql() -> bool:
    from django.conf import settings

    return bool(settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """On PostgreSQL, collect only the test modules that depend on the engine
    (tests/postgresql_half.py says which); ``PG_FULL=1`` collects them all. A module named on
    the command line is always collected."""
    name = collection_path.name
    if not (name.startswith("test_") and name.endswith(".py")):
        return None
    if not _on_postgresql() or postgresql_half.whole_suite():
        return None
    return None if postgresql_half.runs_on_postgresql(collection_path) else True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On PostgreSQL, skip what does not touch the test database's engine: tests on SQLite
    files of their own, and those marked ``sqlite_half`` (the screenshots: pages and pixels)."""
    if not _on_postgresql():
        return
    skip = pytest.mark.skip(reason="independent of the test database: runs in the SQLite half")
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & OWN_SQLITE_FILES or item.get_closest_marker("sqlite_half"):
            item.add_marker(skip)


# Hypothesis fails an example that runs longer than its deadline (200 ms) and a test whose data
# is slow to generate: both measure the machine, not the code, and on a loaded machine they fail
# property tests whose code is right. The suite's property tests check behaviour only.
hypothesis_settings.register_profile(
    "suite", deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
hypothesis_settings.load_profile("suite")


def restore_migrated_rows() -> None:
    """Put back what data migrations wrote: the role groups, the seeded lexicon and its stamp.

    Transactional tests (threads, live servers) flush the database after each test; Django then
    recreates content types and permissions, but not the rows that data migrations made.
    """
    from django.apps import apps

    from knowledge.models import Synonym, lexicon_stamp_renewed
    from reviewconsole.roles import sync_roles

    sync_roles(apps)
    seed = import_module("knowledge.migrations.0002_seed_lexicon").SEED
    created = [
        Synonym.objects.get_or_create(term=term, defaults={"canonical": canonical})[1]
        for term, canonical in seed.items()
    ]
    if any(created):
        lexicon_stamp_renewed()


@pytest.fixture(autouse=True, scope="session")
def _audit_tables_flushed_by_their_owner() -> Iterator[None]:
    """Transactional tests empty every table afterwards, the audit tables included.

    The tables' triggers refuse that to every ordinary statement (reviewconsole migration 0011),
    so the harness's flush lifts them first, as the tables' owner, inside the flush's own
    transaction; the application has no such path.
    """
    from django.db import transaction
    from django.db.backends.base.operations import BaseDatabaseOperations

    original = BaseDatabaseOperations.execute_sql_flush

    def execute_sql_flush(self: BaseDatabaseOperations, sql_list: list[str]) -> None:
        with transaction.atomic(using=self.connection.alias), audit_guards_lifted(self.connection):
            original(self, sql_list)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BaseDatabaseOperations, "execute_sql_flush", execute_sql_flush)
        yield


@pytest.fixture(autouse=True)
def _migrated_rows_after_flush(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("django_db")
    transactional = marker is not None and bool(marker.kwargs.get("transaction"))
    if transactional or "transactional_db" in request.fixturenames:
        request.getfixturevalue("transactional_db")
        restore_migrated_rows()


@pytest.fixture(autouse=True)
def fixture_tenants(request: pytest.FixtureRequest, _migrated_rows_after_flush: None) -> None:
    """Memberships, imports and requests must name a known tenant; the tests' world registers
    its tenants (``FIXTURE_TENANTS``) for every test that uses the database."""
    marker = request.node.get_closest_marker("django_db")
    names = set(request.fixturenames)
    if marker is None and not names & {"db", "transactional_db", "live_server"}:
        return
    transactional = (marker is not None and bool(marker.kwargs.get("transaction"))) or bool(
        names & {"transactional_db", "live_server"}
    )
    request.getfixturevalue("transactional_db" if transactional else "db")
    tenants_exist(*FIXTURE_TENANTS)


@pytest.fixture(autouse=True)
def immediate_tasks(settings: Any) -> None:
    """Background tasks run where they are enqueued, so tests see their effects at once; the
    database backend and a real worker are tested in tests/reviewconsole/test_background.py."""
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}


@pytest.fixture(autouse=True)
def semantic_off(settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The vector branch is off unless a test turns it on, here and in the commands a test runs
    in a process of its own (a replay's temporary database): the tests of the semantic index
    (tests/semantic) use the real local model on small data and a fake embedder for the
    plumbing. Its per-process caches start empty (ids are reused when tests roll back)."""
    from semantic.branch import caches_cleared

    settings.SEMANTIC_EMBEDDER = "off"
    monkeypatch.setenv("CONSOLE_EMBEDDER", "off")
    caches_cleared()
    yield
    caches_cleared()


@pytest.fixture(autouse=True)
def unthrottled_api(settings: Any) -> None:
    """The agent API's per-account rate limit is off unless a test sets one (its own tests do:
    tests/investigations/test_api_limits.py); its counts are database rows, rolled back or
    flushed after each test like every other."""
    settings.CONSOLE_API_RATE = None


@pytest.fixture(autouse=True)
def default_language() -> Iterator[None]:
    """Each test starts in the deployment's language.

    A request answered in another language leaves that language active on the thread (the
    locale middleware activates it and nothing resets it), so a later test rendering a template
    directly would otherwise read the earlier test's language.
    """
    from django.conf import settings
    from django.utils import translation

    translation.activate(settings.LANGUAGE_CODE)
    yield
    translation.deactivate()


@pytest.fixture(autouse=True)
def cold_lexicon_cache() -> None:
    """Each test starts with the search's per-process lexicon cache empty, so the queries a test
    counts do not depend on which test ran before it in the same process."""
    from knowledge import lexicon, postings, search

    postings._lexicon_cache.clear()
    lexicon._cache.clear()
    search._evidence_cache.clear()  # ids are reused when tests roll back
    search._arrays_cache.clear()
    search._postings_cache.clear()


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    """Tests hash many passwords; production's deliberately slow hasher adds nothing here."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="session")
def shared_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test run that its pytest-xdist workers share (``made_once`` files)."""
    folder = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        folder = folder.parent
    return folder


@pytest.fixture(scope="session")
def migrated_sqlite(shared_folder: Path) -> Path:
    """A migrated SQLite file, made once per test run, for tests that run ``manage.py`` processes.

    Tests copy it (``sqlite_database``) rather than migrate a file of their own, which takes
    seconds each time; tests of the migrations themselves still migrate. Under pytest-xdist the
    workers share one file, in the run's common temporary folder.
    """
    return migrated_sqlite_template(shared_folder)


@pytest.fixture
def shared_demo_replay(shared_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``replay --memory demo`` runs in a process of its own on a temporary database that it
    migrates first (half a minute, more on a loaded machine). For tests that need a demo world
    with its stored replay report, the first such test of the run makes that process's answer
    and the others reuse it; each still stores the report in its own database. The replay on a
    temporary database itself is tested where it is the subject
    (tests/evaluation/test_commands.py, tests/experience/test_commands.py), every time."""
    from evaluation.management.commands import replay

    run = vars(replay)["run_on_temporary_database"]

    def shared(command: str, *arguments: str, timeout: int) -> dict[str, Any]:
        key = hashlib.sha256(json.dumps([command, *arguments]).encode()).hexdigest()[:16]
        answer: dict[str, Any] = json_made_once(
            shared_folder / f"temporary-database-{command}-{key}.json",
            lambda: run(command, *arguments, timeout=timeout),
        )
        return answer

    monkeypatch.setattr(replay, "run_on_temporary_database", shared)


@pytest.fixture
def sqlite_database(migrated_sqlite: Path, tmp_path: Path) -> Path:
    """A migrated SQLite file of this test's own, with no users yet."""
    return copy_database(migrated_sqlite, tmp_path / "console.sqlite3")


@pytest.fixture
def make_user(db: None) -> Callable[[str, str], User]:
    def make(username: str, role: str) -> User:
        return user_set_role(username=username, role=role, password=PASSWORD)

    return make


@pytest.fixture
def operator(make_user: Callable[[str, str], User]) -> User:
    return make_user("olivia", Role.OPERATOR)


@pytest.fixture
def reviewer(make_user: Callable[[str, str], User]) -> User:
    return make_user("rita", Role.REVIEWER)


@pytest.fixture
def second_reviewer(make_user: Callable[[str, str], User]) -> User:
    return make_user("ravi", Role.REVIEWER)


@pytest.fixture
def admin_user(make_user: Callable[[str, str], User]) -> User:
    return make_user("ada", Role.ADMIN)


@pytest.fixture
def agent(make_user: Callable[[str, str], User]) -> User:
    return make_user("agent-7", Role.AGENT)


class FrozenClock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[datetime], FrozenClock]]:
    """``frozen_clock(at)`` pins ``reviewconsole.clock.now`` until the test ends."""

    def freeze(at: datetime) -> FrozenClock:
        frozen = FrozenClock(at)
        monkeypatch.setattr(clock, "now", frozen)
        return frozen

    yield freeze
