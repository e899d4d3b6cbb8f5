"""Every Python path and file path the documentation names exists.

Read: README.md and every docs/**/*.md, inline code spans only (fenced blocks are commands and
their output, not references); and the code spans of every docstring of the production code, for
dotted names (a docstring that still names a module's old place fails as a page would).

A dotted name is a token in a span that starts with one of the project's packages (the
import-linter ``root_packages``) followed by at least one ``.name``, not preceded by a letter,
``.``, ``/`` or ``-``. The project's own namespaced vocabularies look like paths (an audit action
``experience.case.approve`` reads like module ``experience.case``), so a dotted name passes when it
is one of:

1. a module or package, or an attribute chain off one (``experience.review.decisions.case_approve``,
   ``reviewconsole.models.Action.CASE_APPROVE``): the longest prefix that is a module is imported
   and the rest is looked up attribute by attribute;
2. a Django model label (``knowledge.Document``) or permission (``experience.use_experience``);
3. an audit action, a value of ``reviewconsole.models.Action`` (``experience.case.approve``);
4. a bus event named in the first column of the Events table of docs/architecture.md
   (``experience.case.stored``); tests/test_events.py holds that table to the code;
5. one of ``NOT_PATHS`` below, each a name of something outside Python, with its reason.

Anything else fails: a stale module (``experience.services`` after the split into subpackages)
is not one of these.

A file path is a token in a span that ends in ``.py`` or ``.html``, or starts with one of the
repository's top folders (``experience/cases/``, ``tests/test_events.py``). It passes when it
exists from the repository's root; a ``.py`` or ``.html`` name without its folders
(``domain.py``, ``cases/services.py``, ``_review_item.html``) passes when it is the tail of a file
the repository holds (templates are also looked up under ``templates/``). A ``:line`` suffix is
dropped, a ``*`` is a glob that must match, ``file.py::name`` needs ``name`` defined in that file
and ``page.html#section`` a ``{% partialdef section %}`` in that template.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import tomllib
from collections.abc import Callable
from functools import cache
from pathlib import Path

from django.apps import apps

from reviewconsole.models import Action

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = tuple(
    tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"][
        "root_packages"
    ]
)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
DOTTED = re.compile(rf"(?<![\w./-])(?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+")
FILE_SUFFIX = r"(?:#[\w-]+|::\w+|:\d+(?:-\d+)?)?"
# Folders of the repository a path may start with (``.venv`` and other hidden ones are not).
# Folders the tests make (var/: installed clients, a demo's files) are no part of the repository:
# a checkout that has run them must not find the docs' runtime paths missing.
TOP_FOLDERS = tuple(
    sorted(
        p.name
        for p in ROOT.iterdir()
        if p.is_dir() and not p.name.startswith((".", "_")) and p.name != "var"
    )
)
ROOTED_PATH = re.compile(
    rf"(?<![\w./-])(?:{'|'.join(TOP_FOLDERS)})/[\w./*-]*{FILE_SUFFIX}(?![\w/])"
)
NAMED_FILE = re.compile(rf"(?<![\w./-])[\w-]+(?:/[\w-]+)*\.(?:py|html){FILE_SUFFIX}(?![\w/])")
NOT_PATHS = {
    "reviewconsole.allow_audit_flush": "a PostgreSQL setting (the old audit escape) that "
    "docs/operations.md names as refused",
    "console.dump": "the file a pg_dump example in README.md writes",
}


def spans(page: Path) -> list[tuple[int, str]]:
    """(line, text) of every inline code span of ``page``, fenced blocks left out."""
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text(encoding="utf-8"))
    return [(text.count("\n", 0, m.start()) + 1, m.group(2)) for m in SPAN.finditer(text)]


def named(pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    """(where, token) of every match of ``pattern`` in the spans of the pages, once each."""
    found: dict[tuple[str, str], None] = {}
    for page in PAGES:
        for line, span in spans(page):
            for match in pattern.finditer(span):
                found[(f"{page.relative_to(ROOT)}:{line}", match.group(0))] = None
    return list(found)


@cache
def event_names() -> frozenset[str]:
    """The backticked names in the first column of docs/architecture.md's Events table."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    heading = re.search(r"^#+ Events\s*$", text, re.MULTILINE)
    if heading is None:
        return frozenset()
    section = re.split(r"^#", text[heading.end() :], maxsplit=1, flags=re.MULTILINE)[0]
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        for line in section.splitlines()
        if line.startswith("|")
    ]
    return frozenset(
        name
        for row in rows[2:]
        if row and row[0].startswith("`")
        for name in re.findall(r"`([^`]+)`", row[0])
    )


@cache
def django_names() -> frozenset[str]:
    """Model labels and permissions (``app.codename``) of the project's models."""
    names: set[str] = set()
    for model in apps.get_models():
        opts = model._meta
        if opts.app_label not in PACKAGES:
            continue
        names.add(opts.label)
        names.update(
            f"{opts.app_label}.{action}_{opts.model_name}" for action in opts.default_permissions
        )
        names.update(f"{opts.app_label}.{codename}" for codename, _ in opts.permissions)
    return frozenset(names)


def is_module(name: str) -> bool:
    """Whether ``name`` is a module or package, found without running it."""
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent that is not a package
        return False


def dotted_problem(dotted: str) -> str | None:
    """None when ``dotted`` names something (see the module's docstring), else why not."""
    if dotted in NOT_PATHS or dotted in django_names() or dotted in Action.values:
        return None
    if dotted in event_names():
        return None
    parts = dotted.split(".")
    module = next(
        (
            ".".join(parts[:end])
            for end in range(len(parts), 0, -1)
            if is_module(".".join(parts[:end]))
        ),
        None,
    )
    if module is None:
        return "no such module"
    if module == dotted:
        return None  # found without running it: some modules refuse to load unconfigured
    value: object = importlib.import_module(module)
    for name in dotted[len(module) + 1 :].split("."):
        if not hasattr(value, name):
            return f"{module} has no {dotted[len(module) + 1 :]}"
        value = getattr(value, name)
    return None


SKIPPED_DIRS = {"node_modules", "staticfiles", "test-artifacts", "__pycache__", "var"}


@cache
def repository_files() -> tuple[str, ...]:
    """The repository's files, relative to its root: hidden and generated folders left out."""
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS]
        base = Path(folder).relative_to(ROOT)
        found += [(base / name).as_posix() for name in files]
    return tuple(found)


def defines(path: Path, name: str) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.name == name
        for node in ast.walk(tree)
    )


def file_problem(token: str) -> str | None:
    """None when the file ``token`` names exists (see the module's docstring), else why not."""
    name = re.split(r"#|::|:(?=\d)", token, maxsplit=1)[0]
    anchor = token[len(name) :]
    if "*" in name:
        return None if any(ROOT.glob(name)) else "no file matches"
    path = next((p for p in (ROOT / name, ROOT / "templates" / name) if p.exists()), None)
    if path is None and name.endswith((".py", ".html")):
        tail = next((f for f in repository_files() if f.endswith("/" + name)), None)
        path = ROOT / tail if tail else None
    if path is None:
        return "no such file"
    if anchor.startswith("::") and not defines(path, anchor[2:]):
        return f"{path.relative_to(ROOT)} defines no {anchor[2:]}"
    if anchor.startswith("#") and not re.search(
        r"{%\s*partialdef\s+" + re.escape(anchor[1:]) + r"[\s%]", path.read_text(encoding="utf-8")
    ):
        return f"{path.relative_to(ROOT)} has no partial {anchor[1:]}"
    return None


DOTTED_NAMES = named(DOTTED)
FILE_NAMES = sorted(set(named(ROOTED_PATH)) | set(named(NAMED_FILE)))


def test_the_scan_finds_the_names_it_is_meant_to() -> None:
    dotted = {token for _, token in DOTTED_NAMES}
    assert "experience.review.decisions.case_approve" in dotted
    assert event_names(), "the Events table of docs/architecture.md was not found"
    assert "experience.case.approve" in dotted
    files = {token for _, token in FILE_NAMES}
    assert "tests/test_events.py" in files
    assert dotted_problem("experience.services") is not None
    assert dotted_problem("experience.cases.services.no_such_service") is not None
    assert file_problem("experience/lesson_domain.py") == "no such file"
    assert file_problem("lesson_domain.py") == "no such file"
    assert file_problem("cases/services.py") is None


def problems(found: list[tuple[str, str]], problem: Callable[[str], str | None]) -> list[str]:
    return [f"{where}: `{token}`: {why}" for where, token in found if (why := problem(token))]


def test_every_dotted_name_the_docs_give_exists() -> None:
    assert problems(DOTTED_NAMES, dotted_problem) == []


def test_every_file_the_docs_name_exists() -> None:
    assert problems(FILE_NAMES, file_problem) == []


def docstring_spans() -> list[tuple[str, str]]:
    """(where, text) of every code span in the docstrings of the production code: a module's,
    a class's or a function's (comments and messages are not read)."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if not isinstance(
                    node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
                ):
                    continue
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 1)}"
                    found += [(where, m.group(2)) for m in SPAN.finditer(doc)]
    return found


def test_every_dotted_name_the_code_docstrings_give_exists() -> None:
    """The docstrings name modules as the docs do (``experience.review.decisions``), and a
    module that moves leaves none naming its old place."""
    named_in_code = {
        (where, match.group(0))
        for where, span in docstring_spans()
        for match in DOTTED.finditer(span)
    }
    assert named_in_code, "no dotted name found in any docstring"
    assert problems(sorted(named_in_code), dotted_problem) == []
