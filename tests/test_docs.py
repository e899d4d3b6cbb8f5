"""The documentation under docs/ names what the code has: commands, unmet names, audit actions.

Cheap checks only; they keep the reference pages from falling behind the code they describe.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from experience.core import domain
from experience.lessons import domain as lesson_domain
from knowledge import services as knowledge_services
from reviewconsole import permissions, tenancy
from reviewconsole.models import Action

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SKIPPED_DIRS = {".venv", ".git", "node_modules", "staticfiles", "test-artifacts", "__pycache__"}
# Section numbers of a document outside the repository (a section sign before a number); built
# from escapes so this file does not contain what it looks for.
SECTION_REFERENCE = re.compile("S" + "PEC \u00a7|\u00a7\\s?\\d")


def contracts() -> str:
    return (DOCS / "contracts.md").read_text(encoding="utf-8")


def all_docs() -> str:
    return "\n".join(page.read_text(encoding="utf-8") for page in sorted(DOCS.glob("*.md")))


def command_names() -> list[str]:
    return sorted(
        path.stem
        for path in ROOT.glob("*/management/commands/*.py")
        if not path.stem.startswith("_")
    )


def experience_unmet_names() -> list[str]:
    """The string constants between the unmet-names and lifecycle headers of
    experience/core/domain.py and experience/lessons/domain.py."""
    names = []
    for module in (domain, lesson_domain):
        source = Path(str(module.__file__)).read_text(encoding="utf-8")
        start = source.index("# --- unmet condition names")
        end = source.index("# --- lifecycle")
        for node in ast.parse(source[start:end]).body:
            value = node.value if isinstance(node, ast.Assign) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                names.append(value.value)
    return names


def test_docs_pages_exist() -> None:
    for page in ("README.md", "architecture.md", "contracts.md", "operations.md"):
        assert (DOCS / page).is_file(), f"docs/{page} is missing"


def test_every_management_command_is_documented() -> None:
    names = command_names()
    assert "review" in names  # the glob found the commands
    text = contracts()
    undocumented = [name for name in names if f"`{name}`" not in text]
    assert undocumented == [], f"commands missing from docs/contracts.md: {undocumented}"


def test_every_experience_unmet_name_is_documented() -> None:
    names = experience_unmet_names()
    assert domain.NO_CHECKED_DIAGNOSIS_EVIDENCE in names
    assert lesson_domain.CONFLICT_UNRESOLVED in names
    text = contracts()
    undocumented = [name for name in names if f"`{name}`" not in text]
    assert undocumented == [], f"unmet names missing from docs/contracts.md: {undocumented}"


def test_other_unmet_names_are_documented() -> None:
    names = [
        tenancy.NOT_IN_TENANT,
        permissions.NOT_PERMITTED,
        knowledge_services.REASON_UNMET,
        knowledge_services.ALREADY_APPROVED_UNMET,
        knowledge_services.ALREADY_REVOKED_UNMET,
        knowledge_services.OWN_SUBMISSION,
    ]
    text = contracts()
    assert [name for name in names if f"`{name}`" not in text] == []


def test_every_audit_action_is_documented() -> None:
    text = all_docs()
    undocumented = [action.value for action in Action if f"`{action.value}`" not in text]
    assert undocumented == [], f"audit actions missing from docs/: {undocumented}"


def repository_texts() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        if set(path.relative_to(ROOT).parts) & SKIPPED_DIRS:
            continue
        if path.is_file() and path.suffix in {".py", ".html", ".md"}:
            found.append(path)
    return found


def test_no_file_points_to_sections_of_an_outside_document() -> None:
    texts = repository_texts()
    assert any(path.name == "architecture.md" for path in texts)
    offenders = [
        str(path.relative_to(ROOT))
        for path in texts
        if SECTION_REFERENCE.search(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert offenders == [], f"point to docs/ or say the rule instead: {offenders}"


@pytest.mark.parametrize("page", ["architecture.md", "contracts.md", "operations.md"])
def test_links_between_pages_name_existing_pages(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([a-z_]+\.md)(?:#[a-z0-9-]+)?\)", text):
        assert (DOCS / target).is_file(), f"docs/{page} links to missing docs/{target}"
