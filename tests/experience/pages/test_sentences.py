"""Machine codes shown to people as sentences: every unmet name and every run reason is covered."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from django.template import Context, Template
from django.utils.functional import Promise

from experience.cases import executor
from experience.pages.sentences import RUN_REASONS, UNMET, code_sentence, run_reason, unmet_sentence
from tests.test_docs import DOCS, experience_unmet_names


def documented_unmet_names() -> list[str]:
    """The names in the table of docs/contracts.md's "Unmet conditions" section."""
    text = (DOCS / "contracts.md").read_text(encoding="utf-8")
    section = text.split("## Unmet conditions", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE)


def executor_reason_codes() -> list[str]:
    """Every constant the executor puts before ``: `` in a reason (``f"{CODE}: …"``)."""
    source = Path(str(executor.__file__)).read_text(encoding="utf-8")
    names = set(re.findall(r'f"\{([A-Z_]+)\}: ', source))
    constants = {
        node.targets[0].id: node.value.value
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }
    return sorted(str(constants[name]) for name in names)


def test_every_documented_and_emitted_unmet_name_has_a_sentence() -> None:
    names = set(documented_unmet_names()) | set(experience_unmet_names())
    assert "no_checked_diagnosis_evidence" in names and len(names) > 15
    assert sorted(names - set(UNMET)) == []


def test_every_run_reason_the_executor_writes_has_a_sentence() -> None:
    codes = executor_reason_codes()
    assert "all_steps_passed" in codes and "missing_context" in codes
    assert sorted(set(codes) - set(RUN_REASONS)) == []


def test_the_sentences_are_translatable() -> None:
    assert all(isinstance(s, Promise) for s in [*UNMET.values(), *RUN_REASONS.values()])


def test_a_passed_run_reads_as_a_sentence_without_the_code() -> None:
    shown = run_reason(f"{executor.ALL_STEPS_PASSED}: {executor.PASSED_DETAIL}")
    assert shown.code == "all_steps_passed"
    assert "all_steps_passed" not in str(shown) and "leads only" in str(shown)


def test_a_reason_keeps_the_detail_that_says_more() -> None:
    shown = run_reason("missing_context: occurred_at, known_at")
    assert str(shown) == f"{RUN_REASONS['missing_context']}: occurred_at, known_at"


@pytest.mark.parametrize("text", ["", "free text from an older run", "unknown_code: x"])
def test_text_that_is_no_known_code_shows_as_it_is(text: str) -> None:
    assert str(run_reason(text)) == text and str(code_sentence(text)) == text


def test_the_filter_shows_the_sentence_and_the_code_as_a_tooltip() -> None:
    html = Template("{% load code_sentences %}{{ code|code_sentence }}").render(
        Context({"code": "no_checked_diagnosis_evidence"})
    )
    sentence = str(unmet_sentence("no_checked_diagnosis_evidence"))
    assert sentence != "no_checked_diagnosis_evidence"
    assert html == (
        f'<span class="code-sentence" title="no_checked_diagnosis_evidence"'
        f' data-code="no_checked_diagnosis_evidence">{sentence}</span>'
    )
