"""Every ``.venv/bin/python manage.py`` command of the README's shell blocks works when pasted
after ``load_demo``, on whatever day the demo was loaded, and prints what its comment says, in
both states of the vector branch: right after ``load_demo`` (lexical only: the worker has not
built the vectors yet) and once the vectors are built with the shipped local model (issue 39,
item 16: an example whose answer changed once the worker had run).

The commands run in-process (``call_command``) against one demo database, in the README's order,
with the clock set months after the README's ticket dates: the demo's memory is dated relative
to the load day, so a command whose times only work on the README's own day fails here.
A command written as a template (``case:…``, an upper-case placeholder such as ``NAME``, an
optional ``[part]``, a file the reader brings) is not run. A command whose comment opens with
"refused" must exit non-zero naming what its comment names (the walkthrough's first approval).
"""

from __future__ import annotations

import re
import shlex
from datetime import datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.helpers import clock_frozen

pytestmark = pytest.mark.django_db

README = Path(settings.BASE_DIR) / "README.md"
PREFIX = [".venv/bin/python", "manage.py"]
LOAD_DAY = datetime.fromisoformat("2027-03-02T10:00:00+08:00")
# Commands a test elsewhere runs: experience_demo replays on a temporary database of its own
# (tests/experience/test_commands.py), not on the demo loaded here.
# The vector branch's comparisons need the vectors of the real model, which the suite runs with
# the branch off: replay --compare-branches with the local model in
# tests/evaluation/test_replay_branches.py, eval_retrieval with a fake model in
# tests/evaluation/test_eval_retrieval.py.
RUN_ELSEWHERE = {"experience_demo", "eval_retrieval"}
NEEDS_VECTORS = {"--compare-branches"}
# Words a comment may open with that the command prints (`# retrieved: rule + case`).
PRINTED_WORD = re.compile(r"^([a-z_]+)[:,]")
CODE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")
PLACEHOLDER = re.compile(r"…|^\[|^[A-Z][A-Z_]+$|\||\$")


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"```(?:sh|bash)\n(.*?)```", text, flags=re.S)


def readme_commands() -> list[tuple[list[str], str]]:
    """(arguments after ``manage.py``, the comment after the command), in README order."""
    commands = []
    for block in shell_blocks(README.read_text(encoding="utf-8")):
        for line in block.replace("\\\n", " ").splitlines():
            if " ".join(PREFIX) not in line:
                continue
            code, _, comment = line.partition(" # ")
            inner = re.search(r"\$\((.*)\)", code)
            words = shlex.split(inner.group(1) if inner else code)
            if words[:2] == PREFIX:
                commands.append((words[2:], comment.strip()))
    return commands


def is_template(arguments: list[str]) -> bool:
    return any(PLACEHOLDER.search(word) for word in arguments) or any(
        word.endswith(".json") and not (Path(settings.BASE_DIR) / word).exists()
        for word in arguments
    )


def printed_words(comment: str) -> list[str]:
    """What the comment says the command prints: its machine words (``needs_review``), and the
    word it opens with before a colon or comma (``retrieved:``, ``verified``)."""
    words = CODE.findall(comment)
    first = PRINTED_WORD.match(comment)
    if first:
        words.append(first.group(1))
    words += [word for word in ("verified", "approved") if re.search(rf"\b{word}$", comment)]
    return sorted(set(words))


def test_the_readme_names_runnable_commands_and_templates_apart() -> None:
    commands = readme_commands()
    runnable = [args for args, _ in commands if not is_template(args)]
    assert len(runnable) >= 10
    assert {args[0] for args in runnable} >= {
        "review",
        "recall",
        "run_skill",
        "run_outcome",
        "research",
        "investigate",
        "add_user",
        "create_token",
    }
    assert printed_words("rules_exclude_purchase, verified") == [
        "rules_exclude_purchase",
        "verified",
    ]
    assert printed_words("retrieved: rule + case, product mismatch") == ["retrieved"]


@pytest.fixture(params=["lexical", "vectors"])
def vector_state(
    request: pytest.FixtureRequest, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> str:
    """``lexical``: the demo as ``load_demo`` leaves it, before the worker built any vector;
    ``vectors``: the same once the worker packed every scope with the shipped local model."""
    if request.param == "vectors":
        settings.SEMANTIC_EMBEDDER = "local"
        monkeypatch.setenv("CONSOLE_EMBEDDER", "local")
    return str(request.param)


def vectors_built(state: str) -> None:
    from semantic.packing import every_scope_packed, status

    if state == "vectors":
        every_scope_packed()
        for space in ("knowledge", "experience"):
            assert status()[space]["waiting"] == 0, status()
            assert status()[space]["vectors"], status()


def test_every_readme_command_works_after_the_demo_is_loaded_on_any_day(
    vector_state: str,
) -> None:
    failures = []
    with clock_frozen(LOAD_DAY):
        call_command("load_demo", "--no-replay", stdout=StringIO())
        vectors_built(vector_state)
        for arguments, comment in readme_commands():
            if (
                is_template(arguments)
                or arguments[0] in RUN_ELSEWHERE
                or NEEDS_VECTORS & set(arguments)
            ):
                continue
            out = StringIO()
            refused = comment.startswith("refused")
            try:
                call_command(*arguments, stdout=out, stderr=StringIO())
            except (CommandError, SystemExit) as error:
                if refused:
                    # A refusal the README shows: it exits non-zero naming what is unmet.
                    missing = [w for w in printed_words(comment) if w != "refused"]
                    missing = [w for w in missing if w not in str(error) + out.getvalue()]
                    if missing:
                        failures.append(
                            f"[{vector_state}] {shlex.join(arguments)}\n"
                            f"  the README says it is refused naming {missing}: {error}"
                        )
                    continue
                failures.append(
                    f"[{vector_state}] {shlex.join(arguments)}\n  exits non-zero: {error}"
                )
                continue
            if refused:
                failures.append(f"[{vector_state}] {shlex.join(arguments)}\n  was not refused")
                continue
            printed = out.getvalue()
            if "{'" in printed:
                failures.append(
                    f"[{vector_state}] {shlex.join(arguments)}\n  prints Python notation:\n{printed}"
                )
            missing = [word for word in printed_words(comment) if word not in printed]
            if missing:
                failures.append(
                    f"[{vector_state}] {shlex.join(arguments)}\n"
                    f"  the README says it prints {missing}:\n{printed}"
                )
    assert not failures, "\n".join(failures)
