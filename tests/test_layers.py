"""The dependency diagram in docs/architecture.md is the import-linter layers contract.

``lint-imports`` checks the code against the contract; this keeps the picture equal to it.
"""

from __future__ import annotations

import re
import tomllib
from itertools import pairwise
from pathlib import Path
from typing import Any

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


def contract_layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c["id"] == "layers"]
    # Only independent siblings ("|"): a ":" layer would allow imports the diagram cannot show.
    assert not any(":" in layer for layer in layers["layers"])
    return [[name.strip() for name in layer.split("|")] for layer in layers["layers"]]


def diagram_edges() -> set[tuple[str, str]]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index("## Dependency direction") :]
    found = re.search(r"```mermaid\n(.*?)```", section, flags=re.DOTALL)
    assert found, "docs/architecture.md has no dependency diagram"
    diagram = found.group(1)
    edges = re.findall(r"^\s*(\w+)\s*-->\s*(\w+)\s*$", diagram, flags=re.MULTILINE)
    assert len(edges) == len(diagram.strip().splitlines()) - 1, "a diagram line is not an edge"
    return set(edges)


def test_the_diagram_draws_exactly_the_contract_layers() -> None:
    layers = contract_layers()
    expected = {
        (upper, lower) for above, below in pairwise(layers) for upper in above for lower in below
    }
    assert diagram_edges() == expected


def test_every_root_package_is_a_layer() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    roots = set(config["tool"]["importlinter"]["root_packages"])
    assert roots == {name for layer in contract_layers() for name in layer}
    # A project app added to INSTALLED_APPS needs its place in the layers.
    project_apps = {name for name in settings.INSTALLED_APPS if (ROOT / name).is_dir()}
    assert project_apps == roots


def _contract(contract_id: str) -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract: dict[str, Any]
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == contract_id]
    return contract


def test_the_experience_packages_are_drawn_in_the_order_the_contract_keeps() -> None:
    layers = _contract("experience-subjects")["layers"]
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index("## Inside experience") :]
    found = re.search(r"```\n(.*?)```", section, flags=re.DOTALL)
    assert found, "docs/architecture.md draws no experience packages"
    drawn = re.findall(r"^(\w+) ", found.group(1), flags=re.MULTILINE)
    assert drawn == layers


def test_every_experience_subpackage_has_its_layer() -> None:
    packages = {p.parent.name for p in (ROOT / "experience").glob("*/__init__.py")}
    # Django's own folders are not subjects.
    packages -= {"management", "migrations", "templatetags"}
    assert packages == set(_contract("experience-subjects")["layers"])


def test_no_package_may_hold_an_import_cycle() -> None:
    contract = _contract("no-cycles")
    assert contract["type"] == "acyclic_siblings"
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert set(contract["ancestors"]) == set(config["tool"]["importlinter"]["root_packages"])
