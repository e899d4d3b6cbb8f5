"""Every row of docs/architecture.md, "Where a rule lives", says rule → module → test.

One case per row: three cells; every file the row names exists; the symbols named in parentheses
after a module are that module's own; the tests named exist, and at least one of them mentions
something the place names, so a row cannot point at an unrelated test. The rules of the few rows
no other test asserted are checked at the end of this file.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path
from typing import cast

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import transaction
from django.http import Http404, HttpResponse
from django.test import RequestFactory
from django_htmx.middleware import HtmxDetails

from curation.models import Thread
from reviewconsole.audit import event_record
from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action
from reviewconsole.reasons import reason_clipped
from reviewconsole.views import HtmxHttpRequest, one_or_tenant_choice

ROOT = Path(__file__).resolve().parent.parent
SECTION = "## Where a rule lives"
HEADER = ["rule", "place", "tests"]
TICKED = re.compile(r"`([^`]+)`")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
TEMPLATE = re.compile(r"[\w/.-]+\.html(?:#[\w-]+)?")
# A symbol another owner's ("Django's `User.has_perm`", "MCP's `not_found`") is not the module's.
OTHERS = re.compile(r"\b\w+'s\s+$")
TEST_NAME = re.compile(r"test_\w+")


def table() -> list[list[str]]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert SECTION in text, f"docs/architecture.md has no {SECTION!r} section"
    section = text[text.index(SECTION) + len(SECTION) :].split("\n## ", 1)[0]
    rows = [line.strip() for line in section.splitlines() if line.strip().startswith("|")]
    cells = [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]
    assert cells[0] == HEADER, f"the table's header is {cells[0]}, not {HEADER}"
    assert set("".join(cells[1])) <= {"-", "|"}, "the header is not followed by its divider"
    return cells[2:]


def slug(rule: str) -> str:
    words = re.sub(r"`[^`]*`|\([^)]*\)", " ", rule)
    return "-".join(re.findall(r"[a-z0-9]+", words.lower())[:6])


ROWS = table()
IDS = [f"{n:02d}-{slug(row[0])}" for n, row in enumerate(ROWS)]


def is_template(token: str) -> bool:
    return TEMPLATE.fullmatch(token) is not None


def names_a_file(token: str) -> bool:
    """A module or migration path (``experience/core/domain.py``) or a template reference."""
    return ("/" in token and token.endswith(".py")) or is_template(token)


def template_problem(token: str) -> str | None:
    """Why a template reference (``_review_item.html#state-badge``) names nothing: templates live
    under ``templates/``, and ``#name`` is a ``{% partialdef %}`` of the file."""
    name, _, partial = token.partition("#")
    path = next((p for p in (ROOT / name, ROOT / "templates" / name) if p.is_file()), None)
    if path is None:
        return f"no template {name}"
    if partial and not re.search(
        r"{%\s*partialdef\s+" + re.escape(partial) + r"[\s%]", path.read_text(encoding="utf-8")
    ):
        return f"{name} has no partial {partial!r}"
    return None


@cache
def tree_of(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """A body's statements, those inside ``if``/``try``/``with`` blocks included."""
    found: list[ast.stmt] = []
    for node in body:
        found.append(node)
        if isinstance(node, ast.If | ast.Try | ast.With):
            for block in ("body", "orelse", "finalbody", "handlers"):
                for inner in getattr(node, block, []):
                    found += _statements(
                        inner.body if isinstance(inner, ast.ExceptHandler) else [inner]
                    )
    return found


def _targets(node: ast.stmt) -> list[str]:
    if isinstance(node, ast.Assign):
        return [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


@cache
def defined(path: Path) -> frozenset[str]:
    """The module's top-level functions, classes and assigned names, and its classes' methods
    and attributes as ``Class.attr``."""
    names: set[str] = set()
    for node in _statements(tree_of(path).body):
        names.update(_targets(node))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for member in _statements(node.body):
                if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names.add(f"{node.name}.{member.name}")
                names.update(f"{node.name}.{name}" for name in _targets(member))
    return frozenset(names)


@cache
def codes(path: Path) -> frozenset[str]:
    """The string literals of the module's code (docstrings left out): the codes and column
    names it spells, such as an unmet name or ``superseded_by``."""
    tree = tree_of(path)
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return frozenset(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    )


def imported_modules(path: Path) -> dict[str, Path]:
    """The project modules the module imports from or binds, by their last name
    (``from reviewconsole.permissions import refusals`` gives ``permissions``)."""
    dotted = set()
    for node in ast.walk(tree_of(path)):
        if isinstance(node, ast.ImportFrom) and node.module:
            dotted.add(node.module)
            dotted.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            dotted.update(alias.name for alias in node.names)
    files = {name: ROOT / (name.replace(".", "/") + ".py") for name in dotted}
    return {name.rsplit(".", 1)[-1]: file for name, file in files.items() if file.is_file()}


def imports_module(tree: ast.Module, dotted: str) -> bool:
    parent, _, stem = dotted.rpartition(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (
            node.module == dotted
            or (node.module == parent and any(a.name == stem for a in node.names))
        ):
            return True
        if isinstance(node, ast.Import) and any(a.name == dotted for a in node.names):
            return True
    return False


def resolves(module: Path, symbol: str) -> bool:
    """Whether ``symbol`` is ``module``'s own: a name or ``Class.attr`` defined there; a dotted
    path through a module (``reviewconsole.errors.UnknownId``, the sibling ``audit.audit_verify``,
    or one the module imports, ``permissions.refusals``) to a name defined there; a code the
    module spells; or an audit action (named by its value) the module records."""
    if symbol in defined(module) or symbol in codes(module):
        return True
    parts = symbol.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        head, rest = "/".join(parts[:cut]), ".".join(parts[cut:])
        candidates = [ROOT / f"{head}.py", module.parent / f"{head}.py"]
        if cut == 1 and parts[0] in imported_modules(module):
            candidates.append(imported_modules(module)[parts[0]])
        if any(path.is_file() and resolves(path, rest) for path in candidates):
            return True
    source = module.read_text(encoding="utf-8")
    return any(a.value == symbol and f"Action.{a.name}" in source for a in Action)


def qualified(symbol: str) -> tuple[str, str] | None:
    """A dotted name through a project module from the root
    (``curation.notifications.mail_send_task``): that module's path and the rest."""
    parts = symbol.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if (ROOT / path).is_file():
            return path, ".".join(parts[cut:])
    return None


def module_symbols(place: str) -> list[tuple[str, str]]:
    """(module path, symbol) for each plain identifier or ``Class.attr`` the place names in
    parentheses after a module path, for ``symbol in `path``` (the symbol's own module named
    after it), and for every name qualified from the root."""
    pairs = []
    depth, module = 0, ""
    for token in re.finditer(r"`([^`]+)`|[()]", place):
        if token.group() in "()":
            depth += 1 if token.group() == "(" else -1
            continue
        text = token.group(1)
        if text.endswith(".py"):
            module = text
            continue
        if not IDENTIFIER.fullmatch(text):
            continue  # text such as `{% source_ref %}`, `/time-zone/`, `create=True`
        elsewhere = re.match(r"\s+in\s+`([^`]+\.py)`", place[token.end() :])
        if elsewhere:
            pairs.append((elsewhere.group(1), text))
        elif found := qualified(text):
            pairs.append(found)
        elif depth > 0 and module and not OTHERS.search(place[: token.start()]):
            pairs.append((module, text))
    return pairs


def file_problem(token: str) -> str | None:
    """Why a backticked file path of a row names nothing (None when it names a file)."""
    if is_template(token):
        return template_problem(token)
    return None if (ROOT / token).is_file() else f"no file {token}"


def named_test_problem(reference: str) -> str | None:
    """Why ``tests/...py`` or ``tests/...py::test_name`` names no test."""
    path, _, function = reference.partition("::")
    if not (path.endswith(".py") and Path(path).name.startswith("test_")):
        return f"{reference} is not a test file"
    if not (ROOT / path).is_file():
        return f"no test file {path}"
    if function and not (TEST_NAME.fullmatch(function) and function in defined(ROOT / path)):
        return f"{path} has no test {function}"
    return None


def mentions(test_file: Path, place: str) -> bool:
    """Whether the test file names a symbol of the place (by its last part) or one of its
    modules: by dotted name or path, by importing it, or a migration as ``migration NNNN``."""
    text = test_file.read_text(encoding="utf-8")
    for token in TICKED.findall(place):
        if token.endswith(".py"):
            dotted = token.removesuffix(".py").replace("/", ".")
            migration = re.match(r"(\w+)/migrations/(\d{4})_", token)
            if (
                token in text
                or re.search(rf"(?<![\w.]){re.escape(dotted)}(?!\w)", text)
                or imports_module(tree_of(test_file), dotted)
                or (migration and re.search(rf"migration {migration.group(2)}\b", text))
            ):
                return True
        elif IDENTIFIER.fullmatch(token) and re.search(
            rf"(?<!\w){re.escape(token.rsplit('.', 1)[-1])}(?!\w)", text
        ):
            return True
    return False


def test_the_table_has_its_rows() -> None:
    assert len(ROWS) >= 50
    assert len(set(IDS)) == len(IDS)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_a_rule_names_its_module_and_its_tests(row: list[str]) -> None:
    assert len(row) == 3 and all(row), f"a row needs rule | place | tests: {row}"
    _rule, place, tests = row
    assert "→" not in place, "tests belong in the tests column"

    ticked = TICKED.findall(place) + TICKED.findall(tests)
    files = [t for t in ticked if names_a_file(t)]
    missing = [problem for t in files if (problem := file_problem(t))]
    assert not missing, "; ".join(missing)

    for module, symbol in module_symbols(place):
        assert (ROOT / module).is_file(), f"no module {module}"
        assert resolves(ROOT / module, symbol), f"{module} defines no {symbol}"

    named_tests = [t for t in TICKED.findall(tests) if t.startswith("tests/")]
    assert named_tests, "the tests column names no test file"
    unknown = [problem for t in named_tests if (problem := named_test_problem(t))]
    assert not unknown, "; ".join(unknown)
    test_files = sorted({ROOT / t.partition("::")[0] for t in named_tests})
    assert any(mentions(path, place) for path in test_files), (
        f"no test of the row mentions a module or symbol of its place: {named_tests}"
    )


# --- the rules no other test asserted ---------------------------------------------------------


@pytest.mark.django_db
def test_a_reason_is_refused_where_it_is_stored_and_a_systems_own_is_clipped() -> None:
    """2,000 characters on every path: the audit event, where every decision's reason is stored,
    refuses one more; what a system writes of itself is cut to 2,000, never refused."""
    with transaction.atomic():
        stored = event_record(
            actor=None, action=Action.RUN_FOLLOW_UP, target="r", reason="x" * 2000
        )
    assert len(stored.reason) == 2000
    with pytest.raises(ValidationFailure) as refused, transaction.atomic():
        event_record(actor=None, action=Action.RUN_FOLLOW_UP, target="r", reason="x" * 2001)
    assert refused.value.field == "reason"

    assert reason_clipped("y" * 5000) == "y" * 2000
    assert reason_clipped("short") == "short"


def test_a_tenant_less_url_names_its_one_item_or_offers_a_choice() -> None:
    """One item: that item; an id naming items of several tenants: a page linking to each
    tenant's; none: not found."""
    request = RequestFactory().get("/curation/threads/T-1/")
    request.user = AnonymousUser()
    request.htmx = HtmxDetails(request)  # type: ignore[attr-defined]
    page_request = cast("HtmxHttpRequest", request)
    own = Thread(thread_id="T-1", tenant="teahouse")
    other = Thread(thread_id="T-1", tenant="milkbar")

    assert one_or_tenant_choice(page_request, "T-1", [own]) is own

    choice = one_or_tenant_choice(page_request, "T-1", [own, other])
    assert isinstance(choice, HttpResponse)
    page = choice.content.decode()
    assert f'href="{own.get_absolute_url()}"' in page
    assert f'href="{other.get_absolute_url()}"' in page

    with pytest.raises(Http404):
        one_or_tenant_choice(page_request, "T-1", [])
