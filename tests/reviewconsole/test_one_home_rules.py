"""Rules that had copies keep one home: the aware-instant check, the run-id rule, the reason cap,
the five scope fields and their columns.

Each test reads the production source (or the model registry) for a copy coming back.
"""

from __future__ import annotations

import ast
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from django.apps import apps
from django.conf import settings
from django.db.models import Field

from experience.core.models import GivenScopeFields, ScopeFields
from reviewconsole.errors import ValidationFailure
from reviewconsole.runids import MAX_RUN_ID, RUN_ID_INVALID, run_id_valid, validate_run_id
from reviewconsole.scopes import SCOPE_FIELDS
from reviewconsole.timeparse import NOT_AWARE, aware_required

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


# Modules another change rewrites (the retrieval pipeline, knowledge search): they keep their
# copies until they open with the shared checks (experience.retrieval.request and the helpers
# below). Remove a name here when its module no longer needs it.
def sources() -> dict[str, str]:
    return {
        str(path.relative_to(BASE)): path.read_text(encoding="utf-8")
        for app in APPS
        for path in sorted((BASE / app).rglob("*.py"))
        if "migrations" not in path.parts
    }


def with_text(text: str) -> list[str]:
    return sorted(name for name, source in sources().items() if text in source)


def test_the_aware_check_has_one_message() -> None:
    assert with_text('"must be timezone-aware"') == ["reviewconsole/timeparse.py"]
    naive = datetime(2026, 9, 18, 14, 0)
    with pytest.raises(ValidationFailure) as refusal:
        aware_required(naive, field="now")
    assert (refusal.value.field, refusal.value.message) == ("now", NOT_AWARE)
    aware = naive.replace(tzinfo=timezone(timedelta(hours=8)))
    assert aware_required(aware, field="now") is aware


def test_the_run_id_rule_has_one_home() -> None:
    assert with_text('characters without spaces"') == ["reviewconsole/runids.py"]
    assert validate_run_id("r" * MAX_RUN_ID) == "r" * MAX_RUN_ID
    for bad in ("", " ", "a b", "a\tb", "a\u3000b", "r" * (MAX_RUN_ID + 1), None, 7):
        assert not run_id_valid(bad)
        with pytest.raises(ValidationFailure) as refusal:
            validate_run_id(bad, field="tickets[0].run_ids[0]")
        assert (refusal.value.field, refusal.value.message) == (
            "tickets[0].run_ids[0]",
            RUN_ID_INVALID,
        )


CUT = re.compile(r"\[:\s*2_?000\s*\]|,\s*2_?000\)")


def test_no_literal_cut_at_the_reason_cap() -> None:
    found = [name for name, source in sources().items() if CUT.search(source)]
    assert found == []
    assert with_text("MAX_REASON = ") == ["reviewconsole/reasons.py"]


def _tuples_of_the_five(source: str) -> int:
    count = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Tuple | ast.List):
            values = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if values[:5] == list(SCOPE_FIELDS):
                count += 1
    return count


def test_the_five_scope_fields_are_listed_once() -> None:
    listed = {name for name, source in sources().items() if _tuples_of_the_five(source)}
    assert listed == {"reviewconsole/scopes.py"}
    defined = {
        name
        for name, source in sources().items()
        if re.search(r"^SCOPE_FIELDS\s*=", source, re.MULTILINE)
    }
    assert defined == {"reviewconsole/scopes.py"}


def test_every_model_with_the_five_scope_columns_takes_them_from_the_mixin() -> None:
    scoped = [
        model
        for model in apps.get_models()
        if {f.name for f in model._meta.concrete_fields} >= set(SCOPE_FIELDS)
    ]
    assert {model._meta.label for model in scoped} >= {
        "experience.Case",
        "experience.Skill",
        "experience.Lesson",
        "experience.Run",
        "experience.IndexScope",
        "curation.SkillProposal",
        "investigations.Investigation",
    }
    assert [m._meta.label for m in scoped if not issubclass(m, ScopeFields)] == []
    for model in scoped:
        fields = [model._meta.get_field(name) for name in SCOPE_FIELDS]
        blank = {field.blank for field in fields if isinstance(field, Field)}
        assert blank == {issubclass(model, GivenScopeFields)}, model._meta.label
