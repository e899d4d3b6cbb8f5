"""Which test modules the PostgreSQL half of ``make test`` runs: those that depend on the engine.

The SQLite half runs every test. The PostgreSQL half runs a test module when

1. its own source names engine-specific code (``TEST_SOURCE``: the vendor, PostgreSQL, raw
   cursors, row locks, transactional tests, threads racing each other, the audit guard), or
2. it is named in ``ENGINE_CODE`` as a test of a production module whose code depends on the
   engine (``PRODUCTION_SOURCE``: raw SQL, ``select_for_update``, savepoints, advisory locks,
   conflict clauses, JSON key lookups, collations, ``pg_dump``), or
3. it lies in a folder of ``ENGINE_FOLDERS`` (the scale-out deployment, PostgreSQL's only).

Everything else (pages, forms, domain rules, commands on SQLite files of their own, the
browser) behaves alike on both engines and runs once, in the SQLite half.
tests/test_postgresql_half.py holds the map to the code: a production module that gains
engine-specific code fails that test until ``ENGINE_CODE`` names the tests that exercise it.
``PG_FULL=1`` runs the whole suite on PostgreSQL.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A test module whose source matches this runs in the PostgreSQL half, whatever it tests.
TEST_SOURCE = re.compile(
    r"connection\.vendor|postgres|select_for_update|transaction=True|transactional_db"
    r"|\.cursor\(|RawSQL|\bthreading\b|ThreadPoolExecutor|MigrationExecutor|audit_guard",
    re.IGNORECASE,
)

# Production code that behaves differently per engine (SQLite ignores row locks, the SQL text
# differs, PostgreSQL enforces what SQLite does not): a module matching this must be a key of
# ``ENGINE_CODE``.
PRODUCTION_SOURCE = re.compile(
    r"connection\.vendor|select_for_update|\.cursor\(|RawSQL|\.raw\(|contrib\.postgres"
    r"|\.extra\(|\bCollate\b|\bGreatest\b|\bLeast\b|ignore_conflicts|update_conflicts"
    r"|__has_key|savepoint|advisory|pg_dump|pg_restore"
)
# Where production code lives: every package the import contracts cover (pyproject.toml's
# ``root_packages``), so a new app is scanned the day it is added. Migrations are run by every
# test database of both halves.
PRODUCTION_PACKAGES = tuple(
    tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"][
        "root_packages"
    ]
)

# Production module → the test modules that exercise its engine-specific code.
ENGINE_CODE: dict[str, tuple[str, ...]] = {
    # Each item tried alone in a savepoint rolled back: PostgreSQL aborts a transaction on an
    # error unless the savepoint takes it.
    "experience/review/console_imports.py": ("tests/experience/review/test_console_imports.py",),
    "agentapi/limits.py": (
        "tests/investigations/test_api_limits.py",
        "tests/investigations/test_live_limit_race.py",
        "tests/mcp/test_server.py",
    ),
    "agentapi/auth.py": ("tests/api/test_auth_grants.py", "tests/api/test_tokens.py"),
    "agentapi/services.py": ("tests/api/test_tokens.py", "tests/api/test_auth_grants.py"),
    "curation/incidents.py": (
        "tests/curation/test_services.py",
        "tests/curation/test_incident_identity.py",
    ),
    "curation/notifications.py": (
        "tests/curation/test_notification_outbox.py",
        "tests/curation/test_notifications.py",
    ),
    "curation/proposals.py": (
        "tests/curation/test_proven_patterns.py",
        "tests/curation/test_services.py",
    ),
    "curation/rereview.py": (
        "tests/curation/test_services.py",
        "tests/experience/review/test_agent_refutations.py",
    ),
    "evaluation/replay.py": ("tests/evaluation/test_replay.py",),
    "experience/cases/executor.py": (
        "tests/experience/cases/test_executor.py",
        "tests/experience/cases/test_concurrency.py",
    ),
    "experience/index/postings.py": (
        "tests/experience/index/test_postings_kept.py",
        "tests/experience/index/test_retrieval_index.py",
        "tests/experience/index/test_index_delta.py",
        "tests/experience/retrieval/test_retrieval.py",
    ),
    "experience/lessons/outcome_tallies.py": ("tests/experience/lessons/test_confidence_rule.py",),
    "experience/review/conflicts.py": ("tests/experience/review/test_conflict_resolution.py",),
    "experience/review/decisions.py": (
        "tests/experience/cases/test_concurrency.py",
        "tests/experience/cases/test_services.py",
        "tests/experience/lessons/test_lessons.py",
    ),
    "experience/review/lifecycle.py": (
        "tests/experience/cases/test_concurrency.py",
        "tests/experience/review/test_lifecycle_fuzz.py",
    ),
    "experience/review/outcomes.py": ("tests/experience/review/test_outcomes.py",),
    "experience/review/claimable.py": (
        "tests/reviewconsole/test_claims.py",
        "tests/reviewconsole/test_claims_race.py",
    ),
    "experience/review/outdating.py": ("tests/experience/lessons/test_outdated_lessons.py",),
    "experience/runs/claims.py": (
        "tests/experience/runs/test_run_claim_race.py",
        "tests/experience/runs/test_run_ownership.py",
    ),
    "experience/runs/followups.py": ("tests/ui/test_run_follow_up.py",),
    "experience/runs/records.py": ("tests/experience/runs/test_persistence.py",),
    "knowledge/lexicon.py": ("tests/knowledge/test_lexicon_reindex.py",),
    "knowledge/search.py": (
        "tests/knowledge/test_search_cache.py",
        "tests/knowledge/test_exact_order.py",
        "tests/knowledge/test_gate_database.py",
        "tests/knowledge/test_search_access.py",
        "tests/knowledge/test_revisions.py",
        "tests/knowledge/test_search_delta.py",
    ),
    "knowledge/selectors.py": ("tests/knowledge/test_console_documents.py",),
    "knowledge/services.py": (
        "tests/knowledge/test_document_review.py",
        "tests/knowledge/test_revisions.py",
    ),
    "reviewconsole/claims.py": (
        "tests/reviewconsole/test_claims.py",
        "tests/reviewconsole/test_claims_race.py",
    ),
    "reviewconsole/audit.py": (
        "tests/reviewconsole/test_audit.py",
        "tests/reviewconsole/test_audit_chain.py",
        "tests/reviewconsole/test_audit_integrity.py",
    ),
    "reviewconsole/backup.py": (
        "tests/reviewconsole/test_audit_guard.py",
        "tests/reviewconsole/test_restore_safety.py",
    ),
    "reviewconsole/conversations.py": (
        "tests/experience/review/test_changes.py",
        "tests/knowledge/test_document_changes.py",
    ),
    "reviewconsole/dbroles.py": (
        "tests/reviewconsole/test_audit_guard_roles.py",
        "tests/scaleout/test_roles.py",
    ),
    "reviewconsole/guard.py": (
        "tests/reviewconsole/test_audit_guard.py",
        "tests/reviewconsole/test_audit_guard_roles.py",
    ),
    "reviewconsole/health.py": ("tests/reviewconsole/test_health.py",),
    "reviewconsole/writelock.py": ("tests/reviewconsole/test_write_lock.py",),
    "reviewconsole/metrics.py": ("tests/api/test_metrics.py",),
    "reviewconsole/services.py": (
        "tests/reviewconsole/test_roles_and_users.py",
        "tests/reviewconsole/test_signon.py",
    ),
    "reviewconsole/statements.py": ("tests/reviewconsole/test_statements.py",),
    "semantic/branch.py": (
        "tests/semantic/test_knowledge_branch.py",
        "tests/experience/retrieval/test_semantic_retrieval.py",
        "tests/experience/index/test_index_delta.py",
    ),
    "semantic/packing.py": (
        "tests/evaluation/test_replay_branches.py",
        "tests/experience/index/test_index_delta.py",
    ),
    # The shared question table: one raw read, a conflict clause in a savepoint, a raw trim.
    "semantic/queries.py": ("tests/semantic/test_queries.py",),
    "textsearch/delta.py": (
        "tests/knowledge/test_search_delta.py",
        "tests/experience/index/test_index_delta.py",
    ),
    "textsearch/postings.py": (
        "tests/knowledge/test_postings.py",
        "tests/knowledge/test_partial_head.py",
        "tests/experience/index/test_retrieval_index.py",
    ),
}

# Folders whose every module runs in the PostgreSQL half.
ENGINE_FOLDERS = ("tests/scaleout",)


def whole_suite() -> bool:
    """``PG_FULL=1``: the PostgreSQL half runs every test."""
    return os.environ.get("PG_FULL", "") not in ("", "0")


def engine_modules() -> set[str]:
    """The test modules named by ``ENGINE_CODE`` (paths relative to the repository)."""
    return {test for tests in ENGINE_CODE.values() for test in tests}


def runs_on_postgresql(module: Path) -> bool:
    """Whether the PostgreSQL half runs the test module at ``module``."""
    relative = module.resolve().relative_to(ROOT).as_posix()
    if relative in engine_modules():
        return True
    if any(relative.startswith(folder + "/") for folder in ENGINE_FOLDERS):
        return True
    return bool(TEST_SOURCE.search(module.read_text(encoding="utf-8")))


def engine_specific_production_modules() -> set[str]:
    """Every production module whose source matches ``PRODUCTION_SOURCE``."""
    found = set()
    for package in PRODUCTION_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            if "/migrations/" in relative:
                continue
            if PRODUCTION_SOURCE.search(path.read_text(encoding="utf-8")):
                found.add(relative)
    return found
