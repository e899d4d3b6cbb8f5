"""What a write sets in motion is listed, and only the listed things happen.

docs/architecture.md ("Events") names every event, the functions that publish it and its
subscribers. These tests hold that table to the code (the ``dispatch`` calls in the source and
the subscriptions made at start-up), keep Django's model signals out of the project, so no
effect of a write can hide in a receiver, and drive one publishing service per event: every
subscriber is reached inside the service's transaction, so a subscriber that fails undoes the
write.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import tomllib
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, get_type_hints

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import signals

from experience.cases.models import Case
from experience.cases.schema import parse_case
from experience.cases.services import case_submit, evidence_check
from experience.core.models import Status
from experience.lessons import services as lessons
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from experience.lessons.schema import parse_lesson
from experience.review import decisions
from experience.review.decisions import case_approve
from experience.review.outcomes import run_outcome_report
from experience.review.revocation import lesson_revoke
from experience.runs.claims import run_claim
from experience.runs.models import Run, RunOutcome
from experience.runs.records import references_record, run_store
from investigations.models import Investigation
from investigations.services import investigation_run
from knowledge.models import Document, Synonym
from knowledge.schema import parse_document
from knowledge.services import document_add, document_submit, synonym_set
from reviewconsole import dispatch
from reviewconsole.dispatch import Published
from tests.experience.conftest import NOW, SCOPE, approve_checked, case_data
from tests.experience.lessons.test_lessons import lesson_data
from tests.investigations.conftest import AT, KNOWN, TICKET
from tests.knowledge.conftest import document as document_data

ROOT = Path(__file__).resolve().parent.parent
IMPORTLINTER = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "importlinter"
]
PACKAGES = tuple(IMPORTLINTER["root_packages"])
LAYERS = next(c for c in IMPORTLINTER["contracts"] if c["id"] == "layers")["layers"]
DOTTED = re.compile(rf"^(?:{'|'.join(PACKAGES)})(?:\.\w+){{2,}}$")

MODEL_SIGNALS = {
    "pre_init": signals.pre_init,
    "post_init": signals.post_init,
    "pre_save": signals.pre_save,
    "post_save": signals.post_save,
    "pre_delete": signals.pre_delete,
    "post_delete": signals.post_delete,
    "m2m_changed": signals.m2m_changed,
}
# Loading, not writing: every model's stored datetimes without a local time are shown in UTC,
# third-party models included, so no service could make this call (docs/architecture.md).
ALLOWED_RECEIVERS = {("post_init", "reviewconsole.display")}


def events_table() -> list[list[str]]:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text[text.index("### Events") :]
    rows = re.findall(r"^\|(.*)\|\s*$", section.split("\n\n### ", 1)[0], flags=re.MULTILINE)
    cells = [[cell.strip() for cell in row.split(" | ")] for row in rows]
    assert cells[0][0] == "event" and set(cells[1][0]) <= {"-", "|"}, "no events table"
    return cells[2:]


def ticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def documented() -> dict[str, tuple[set[str], list[str]]]:
    """Per event name: its documented publishers, and its subscribers in order (each clause of
    the subscribers column, separated by semicolons, starts with the subscriber's name)."""
    table = {}
    for event, published_by, subscribed in events_table():
        name = ticked(event)[0]
        publishers = {ref for ref in ticked(published_by) if DOTTED.match(ref)}
        handlers = [ticked(clause)[0] for clause in subscribed.split(";")]
        assert all(DOTTED.match(handler) for handler in handlers), handlers
        assert name not in table, f"{name} is listed twice"
        table[name] = (publishers, handlers)
    return table


def source_files() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).with_suffix("")
            if "migrations" not in relative.parts:
                yield ".".join(relative.parts).removesuffix(".__init__"), path


def functions(tree: ast.Module) -> Iterator[tuple[str, ast.AST]]:
    """The module's functions and its classes' methods, by qualified name."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for method in node.body:
                if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield f"{node.name}.{method.name}", method


def layer_of(package: str) -> int:
    """The position of an app in the ``layers`` contract, 0 at the top."""
    for position, layer in enumerate(LAYERS):
        if package in [name.strip() for name in layer.split("|")]:
            return position
    raise AssertionError(f"{package} is in no layer")


def events_in_source() -> dict[str, str]:
    """Every event: the qualified name of each class deriving from ``Published``, by class
    name (class names are unique among events)."""
    found: dict[str, str] = {}
    for module, path in source_files():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and any(
                isinstance(base, ast.Name) and base.id == "Published" for base in node.bases
            ):
                assert node.name not in found, f"two events named {node.name}"
                found[node.name] = f"{module}.{node.name}"
    return found


def published_in_source() -> dict[str, set[str]]:
    """Per event: the functions whose body calls ``dispatch(EventName(...))``."""
    events = events_in_source()
    found: dict[str, set[str]] = defaultdict(set)
    for module, path in source_files():
        if module == dispatch.__name__:
            continue
        for name, function in functions(ast.parse(path.read_text(encoding="utf-8"))):
            for node in ast.walk(function):
                if not isinstance(node, ast.Call) or not (
                    (isinstance(node.func, ast.Name) and node.func.id == "dispatch")
                    or (isinstance(node.func, ast.Attribute) and node.func.attr == "dispatch")
                ):
                    continue
                event = node.args[0] if node.args else None
                assert (
                    isinstance(event, ast.Call)
                    and isinstance(event.func, ast.Name)
                    and event.func.id in events
                ), f"{module}.{name} publishes something not built as EventName(...)"
                found[events[event.func.id]].add(f"{module}.{name}")
    return found


def event_class(name: str) -> type[Published]:
    module, _, qualname = name.rpartition(".")
    cls = getattr(importlib.import_module(module), qualname)
    assert isinstance(cls, type) and issubclass(cls, Published), name
    return cls


EVENTS = sorted(events_in_source().values())


def qualified(handler: Any) -> str:
    return f"{handler.__module__}.{handler.__qualname__}"


def test_the_docs_list_every_event_with_its_publishers_and_subscribers() -> None:
    table = documented()
    assert set(table) == set(EVENTS)
    in_source = published_in_source()
    for name in EVENTS:
        publishers, handlers = table[name]
        assert publishers == in_source[name], name
        assert handlers == [qualified(h) for h in dispatch.subscribers(event_class(name))], name


@pytest.mark.parametrize("name", EVENTS)
def test_an_event_is_a_frozen_dataclass_that_carries_the_moment_of_its_write(name: str) -> None:
    cls = event_class(name)
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen and "now" in {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("name", EVENTS)
def test_only_effects_that_go_up_a_layer_are_on_the_bus(name: str) -> None:
    """What a write sets in motion in its own app or below is called by name in the write: each
    subscriber sits in an app above the one that defines (and publishes) the event."""
    publisher = layer_of(name.split(".")[0])
    for handler in dispatch.subscribers(event_class(name)):
        assert layer_of(handler.__module__.split(".")[0]) < publisher, qualified(handler)


@pytest.mark.parametrize("name", EVENTS)
def test_a_handler_takes_the_event_and_returns_nothing(name: str) -> None:
    for handler in dispatch.subscribers(event_class(name)):
        hints = get_type_hints(handler)
        parameters = list(inspect.signature(handler).parameters)
        assert hints.get("return") is type(None), qualified(handler)
        assert len(parameters) == 1 and hints[parameters[0]] is event_class(name), qualified(
            handler
        )


def project_receivers(signal: Any) -> Iterator[str]:
    for _key, receiver, *_ in signal.receivers:
        live = receiver() if isinstance(receiver, weakref.ReferenceType) else receiver
        module = getattr(live, "__module__", "") or ""
        if module.split(".")[0] in PACKAGES:
            yield module


def test_the_project_connects_no_model_signal() -> None:
    """After start-up (every app's ``ready`` has run) no project function receives a model
    signal, but the one display marker."""
    connected = {
        (name, module)
        for name, signal in MODEL_SIGNALS.items()
        for module in project_receivers(signal)
    }
    assert connected == ALLOWED_RECEIVERS


def test_no_module_of_the_project_uses_model_signals() -> None:
    """Also the modules start-up does not import: none imports Django's model signals or the
    ``receiver`` decorator, but the display marker's."""
    uses = re.compile(r"django\.db\.models\.signals|django\.db\.models import .*\bsignals\b|"
                      r"django\.dispatch import .*\breceiver\b")  # fmt: skip
    found = {module for module, path in source_files() if uses.search(path.read_text("utf-8"))}
    assert found == {module for _, module in ALLOWED_RECEIVERS}


# --- each event, published by a service ----------------------------------------------------------

Write = Callable[[], object]
Written = Callable[[], bool]


class Refused(Exception):
    pass


def users(request: pytest.FixtureRequest, *names: str) -> list[User]:
    return [request.getfixturevalue(name) for name in names]


def two_approved_cases(request: pytest.FixtureRequest) -> list[Case]:
    reviewer, second = users(request, "reviewer", "second_reviewer")
    made = []
    for incident, title in (
        ("INC-1", "二号店优惠券无法使用：门店范围漏配"),
        ("INC-2", "二号店水果茶券不可用"),
    ):
        case, _ = case_submit(
            content=parse_case(case_data(incident=incident, title=title)), actor=reviewer
        )
        approve_checked(case, actor=second)
        made.append(case)
    return made


def opposed_lessons(request: pytest.FixtureRequest) -> tuple[Lesson, Lesson]:
    """An approved failure lesson and a submitted success pattern of its scene: approving the
    second opens a conflict."""
    reviewer, second = users(request, "reviewer", "second_reviewer")
    cited = [case.id for case in two_approved_cases(request)]
    first, _ = lessons.lesson_submit(content=parse_lesson(lesson_data(cited)), actor=reviewer)
    decisions.lesson_approve(lesson=first, actor=second, reason="two incidents")
    other = lesson_data(cited, lesson_type="success_pattern", conclusion="刷新")
    opposed, _ = lessons.lesson_submit(content=parse_lesson(other), actor=reviewer)
    return first, opposed


def case_stored(request: pytest.FixtureRequest) -> tuple[Write, Written]:
    (reviewer,) = users(request, "reviewer")
    content = parse_case(case_data())
    return lambda: case_submit(content=content, actor=reviewer), Case.objects.exists


def lesson_stored(request: pytest.FixtureRequest) -> tuple[Write, Written]:
    (reviewer,) = users(request, "reviewer")
    cited = [case.id for case in two_approved_cases(request)]
    content = parse_lesson(lesson_data(cited))
    return lambda: lessons.lesson_submit(content=content, actor=reviewer), Lesson.objects.exists


def item_status_changed(request: pytest.FixtureRequest) -> tuple[Write, Written]:
    reviewer, second = users(request, "reviewer", "second_reviewer")
    case, _ = case_submit(content=parse_case(case_data()), actor=reviewer)
    evidence_check(case=case, key="diagnosis/0", actor=second)
    return (
        lambda: case_approve(case=case, actor=second, reason="checked"),
        Case.objects.filter(pk=case.pk, status=Status.APPROVED).exists,
    )


def lesson_conflict_opened(request: pytest.FixtureRequest) -> tuple[Write, Written]:
    (second,) = users(request, "second_reviewer")
    _, opposed = opposed_lessons(request)
    return (
        lambda: decisions.lesson_approve(lesson=opposed, actor=second, reason="another incident"),
        LessonConflict.objects.exists,
    )


def lesson_conflict_closed(request: pytest.FixtureRequest) -> tuple[Write, Written]:
    (second,) = users(request, "second_reviewer")
    _, opposed = opposed_lessons(request)
    decisions.lesson_approve(lesson=opposed, actor=second, reason="another incident")
    return (
        lambda: lesson_revoke(lesson=opposed, actor=second, reason="refreshing never helped"),
        LessonConflict.objects.filter(status=ConflictStatus.RESOLVED).exists,
    )


def skill_run_stored(request: pytest.FixtureRequest) -> tuple[Write, Written]:
    (agent,) = users(request, "agent")
    return (
        lambda: run_store(
            run_id="run-events",
            skill_id="skill:" + "0" * 64,
            scope=SCOPE,
            context={},
            steps=[],
            observations=[],
            cases=[],
            status="succeeded",
            reason="",
            tool_calls=0,
            started_at=NOW,
            finished_at=NOW,
            cited_documents=[],
            actor=agent,
        ),
        Run.objects.exists,
    )


def run_outcome_reported(request: pytest.FixtureRequest) -> tuple[Write, Written]:
    (agent,) = users(request, "agent")
    (case, _second) = two_approved_cases(request)
    with transaction.atomic():
        run_claim(run_id="run-outcome-events", actor=agent, tenant=case.tenant, at=NOW)
        references_record(run_id="run-outcome-events", items=[(case.id, "case")], at=NOW)
    return (
        lambda: run_outcome_report(
            run_id="run-outcome-events", outcome="lead_was_wrong", actor=agent
        ),
        RunOutcome.objects.exists,
    )


def investigation_stored(request: pytest.FixtureRequest) -> tuple[Write, Written]:
    (agent,) = users(request, "agent")
    return (
        lambda: investigation_run(
            actor=agent,
            text=TICKET,
            scope=SCOPE,
            occurred_at=datetime.fromisoformat(AT),
            known_at=datetime.fromisoformat(KNOWN),
        ),
        Investigation.objects.exists,
    )


def lexicon_changed(request: pytest.FixtureRequest) -> tuple[Write, Written]:
    (operator,) = users(request, "operator")
    return (
        lambda: synonym_set(term="点数", canonical="积分", actor=operator),
        Synonym.objects.filter(term="点数").exists,
    )


def document_submitted(request: pytest.FixtureRequest) -> tuple[Write, Written]:
    (operator,) = users(request, "operator")
    draft = document_add(
        content=parse_document(document_data(approved=False)).content, actor=operator
    )
    return (
        lambda: document_submit(document=draft, actor=operator, change_note="first version"),
        Document.objects.filter(submitted_at__isnull=False).exists,
    )


SCENARIOS: dict[str, Callable[[pytest.FixtureRequest], tuple[Write, Written]]] = {
    "experience.cases.events.CaseStored": case_stored,
    "experience.lessons.events.LessonStored": lesson_stored,
    "experience.review.events.ItemStatusChanged": item_status_changed,
    "experience.review.events.LessonConflictOpened": lesson_conflict_opened,
    "experience.review.events.LessonConflictClosed": lesson_conflict_closed,
    "experience.runs.events.SkillRunStored": skill_run_stored,
    "experience.review.events.RunOutcomeReported": run_outcome_reported,
    "investigations.events.InvestigationStored": investigation_stored,
    "knowledge.events.LexiconChanged": lexicon_changed,
    "knowledge.events.DocumentSubmitted": document_submitted,
}


@pytest.fixture
def scenario(
    request: pytest.FixtureRequest, frozen_clock: Callable[[datetime], Any]
) -> Callable[[str], tuple[Write, Written]]:
    frozen_clock(NOW)
    return lambda name: SCENARIOS[name](request)


def test_every_event_has_a_scenario() -> None:
    assert set(SCENARIOS) == set(EVENTS)


@pytest.mark.django_db
@pytest.mark.parametrize("name", EVENTS)
def test_an_event_reaches_every_subscriber_inside_the_writers_transaction(
    name: str,
    scenario: Callable[[str], tuple[Write, Written]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    event = event_class(name)
    write, written = scenario(name)
    expected = [qualified(handler) for handler in dispatch.subscribers(event)]
    reached: list[tuple[str, bool, datetime]] = []

    def spy(handler: Any) -> Any:
        def heard(published: Published) -> None:
            reached.append(
                (qualified(handler), transaction.get_connection().in_atomic_block, published.now)
            )
            handler(published)

        return heard

    monkeypatch.setitem(
        dispatch._subscribers, event, [spy(handler) for handler in dispatch.subscribers(event)]
    )
    write()

    assert written()
    assert reached == [(handler, True, NOW) for handler in expected]


@pytest.mark.django_db
@pytest.mark.parametrize("name", EVENTS)
def test_a_subscriber_that_fails_undoes_the_write(
    name: str,
    scenario: Callable[[str], tuple[Write, Written]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    event = event_class(name)
    write, written = scenario(name)

    def refuse(published: Published) -> None:
        raise Refused

    monkeypatch.setitem(dispatch._subscribers, event, [*dispatch.subscribers(event), refuse])
    with pytest.raises(Refused):
        write()
    assert not written()
