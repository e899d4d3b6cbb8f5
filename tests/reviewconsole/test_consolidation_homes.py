"""Where shared pieces live, so copies and cycles do not come back.

- the demo replay lives with the demo memory; the replay engine knows nothing of the demo;
- production code never sets the clock: a write passes its moment down instead;
- running a command on a temporary database is ``reviewconsole.temporary_database``'s job.
"""

from __future__ import annotations

import ast
from pathlib import Path

from django.conf import settings

import evaluation.demo
import evaluation.replay
from evaluation.management.commands import replay as replay_command
from experience.management.commands import experience_demo
from reviewconsole import clock, temporary_database

BASE = Path(settings.BASE_DIR)
APPS = (
    "reviewconsole",
    "knowledge",
    "experience",
    "curation",
    "agentapi",
    "evaluation",
    "investigations",
    "console",
)


def production_modules() -> list[Path]:
    return sorted(path for app in APPS for path in (BASE / app).rglob("*.py"))


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, also inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_replay_engine_does_not_import_the_demo() -> None:
    assert "evaluation.demo" not in imported_modules(BASE / "evaluation" / "replay.py")
    assert not hasattr(evaluation.replay, "replay_demo_here")
    assert vars(replay_command)["replay_demo_here"] is evaluation.demo.replay_demo_here


def test_production_code_never_sets_the_clock() -> None:
    """No assignment to ``clock.<name>``, no ``setattr`` on it, no helper that sets it (the
    demo loaders once froze the process's clock; they pass ``now`` down now)."""
    offenders = []
    for path in production_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AugAssign | ast.AnnAssign)
                else []
            )
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "clock"
                ):
                    offenders.append(f"{path.relative_to(BASE)}:{target.lineno}")
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "clock"
                and node.attr != "now"
            ):
                offenders.append(f"{path.relative_to(BASE)}:{node.lineno}: clock.{node.attr}")
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "setattr"
                and node.args
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id == "clock"
            ):
                offenders.append(f"{path.relative_to(BASE)}:{node.lineno}: setattr(clock, ...)")
            if isinstance(node, ast.Global) and "now" in node.names:
                offenders.append(f"{path.relative_to(BASE)}:{node.lineno}: global now")
    assert offenders == []
    assert not hasattr(clock, "frozen")
    assert not hasattr(evaluation.demo, "clock_at")


def test_both_demo_commands_use_the_one_temporary_database_helper() -> None:
    for module in (experience_demo, replay_command):
        source = Path(module.__file__ or "").read_text(encoding="utf-8")
        assert "subprocess" not in source and "tempfile" not in source
        assert module.run_on_temporary_database is temporary_database.run_on_temporary_database
        assert module.enter_temporary_database is temporary_database.enter_temporary_database


def test_functions_no_code_path_called_stay_removed() -> None:
    import agentapi.models
    import curation.aar_drafts
    import curation.domain.incidents
    import curation.domain.staleness
    import curation.selectors.incidents
    import curation.selectors.proposals
    import experience.cases.selectors
    import experience.lessons.domain
    import experience.lessons.selectors
    import experience.pages.selectors

    removed: dict[object, tuple[str, ...]] = {
        experience.cases.selectors: ("evidence_get", "review_queue", "NO_SUCH_EVIDENCE"),
        experience.pages.selectors: ("skill_lines",),
        curation.domain.incidents: ("distinct_incidents",),
        curation.domain.staleness: ("parse_document_id",),
        curation.aar_drafts: ("drafts_of_case",),
        experience.lessons.domain: ("scene_similarity", "lesson_availability"),
        experience.lessons.selectors: ("lesson_in_open_conflict",),
        agentapi.models.ApiToken: ("is_revoked",),
        # Support counted as incidents is IncidentSupport: Confidence is the estimator's.
        curation.selectors.incidents: ("Confidence", "confidence_of"),
        curation.selectors.proposals: ("Confidence", "confidence_of"),
    }
    for module, names in removed.items():
        assert [name for name in names if hasattr(module, name)] == []


def test_incidents_are_counted_and_approval_checked_in_one_place() -> None:
    import experience.core.domain
    import experience.lessons.domain

    lessons = experience.lessons.domain
    assert vars(lessons)["distinct_incidents"] is experience.core.domain.distinct_incidents
    assert vars(lessons)["common_unmet"] is experience.core.domain.common_unmet


def test_one_class_is_named_confidence() -> None:
    found = [
        str(path.relative_to(BASE))
        for path in production_modules()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.name == "Confidence"
    ]
    assert found == ["experience/lessons/domain.py"]


def test_the_evidence_of_a_raw_case_item_is_listed_in_one_place() -> None:
    import agentapi.schemas
    import experience.demo
    from experience.cases.schema import evidence_objects

    item = {
        "observations": [{"source_id": "o"}],
        "diagnosis": {"evidence": [{"source_id": "d"}]},
        "outcome": {"statement": "no evidence here"},
        "counterevidence": [{"evidence": [{"source_id": "c1"}, {"source_id": "c2"}]}],
    }
    found = evidence_objects(item)
    assert [e["source_id"] for e in found] == ["o", "d", "c1", "c2"]
    found[0]["verified"] = True
    assert item["observations"] == [{"source_id": "o", "verified": True}]  # the same objects
    assert evidence_objects({}) == []
    for module in (experience.demo, agentapi.schemas):
        assert not hasattr(module, "_evidence_objects")
