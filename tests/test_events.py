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
import re
import tomllib
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import signals

from experience.cases.models import Case
from experience.cases.schema import parse_case
from experience.cases.services import case_approve, case_submit, evidence_check
from experience.core.models import Status
from experience.lessons import services as lessons
from experience.lessons.models import ConflictStatus, Lesson, LessonConflict
from experience.lessons.schema import parse_lesson
from experience.review.outcomes import run_outcome_report
from experience.review.revocation import lesson_revoke
from experience.runs.claims import run_claim
from experience.runs.models import Run, RunOutcome
from experience.runs.records import references_record, run_store
from investigations.models import Investigation
from investigations.services import investigation_run
from knowledge.models import Document, Synonym
from knowledge.services import document_revoke, documents_import, synonym_set
from reviewconsole import dispatch
from reviewconsole.dispatch import Event
from tests.experience.conftest import NOW, SCOPE, approve_checked, case_data
from tests.experience.test_lessons import lesson_data
from tests.investigations.conftest import AT, KNOWN, TICKET
from tests.knowledge.conftest import document

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = tuple(
    tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"][
        "root_packages"
    ]
)
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


def published_in_source() -> dict[str, set[str]]:
    """Per event name: the functions whose body calls ``dispatch(Event.NAME, ...)``."""
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
                    isinstance(event, ast.Attribute)
                    and isinstance(event.value, ast.Name)
                    and event.value.id == "Event"
                ), f"{module}.{name} publishes an event not named as Event.NAME"
                found[Event[event.attr].value].add(f"{module}.{name}")
    return found


def qualified(handler: Any) -> str:
    return f"{handler.__module__}.{handler.__qualname__}"


def test_the_docs_list_every_event_with_its_publishers_and_subscribers() -> None:
    table = documented()
    assert set(table) == {event.value for event in Event}
    in_source = published_in_source()
    for event in Event:
        publishers, handlers = table[event.value]
        assert publishers == in_source[event.value], event
        assert handlers == [qualified(h) for h in dispatch.subscribers(event)], event


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
    lessons.lesson_approve(lesson=first, actor=second, reason="two incidents")
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
        lambda: lessons.lesson_approve(lesson=opposed, actor=second, reason="another incident"),
        LessonConflict.objects.exists,
    )


def lesson_conflict_closed(request: pytest.FixtureRequest) -> tuple[Write, Written]:
    (second,) = users(request, "second_reviewer")
    _, opposed = opposed_lessons(request)
    lessons.lesson_approve(lesson=opposed, actor=second, reason="another incident")
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


def document_revoked(request: pytest.FixtureRequest) -> tuple[Write, Written]:
    (operator,) = users(request, "operator")
    documents_import(items=[document()], actor=operator)
    version = Document.objects.get()
    return (
        lambda: document_revoke(document=version, actor=operator, reason="wrong threshold"),
        Document.objects.filter(revoked=True).exists,
    )


SCENARIOS: dict[Event, Callable[[pytest.FixtureRequest], tuple[Write, Written]]] = {
    Event.CASE_STORED: case_stored,
    Event.LESSON_STORED: lesson_stored,
    Event.ITEM_STATUS_CHANGED: item_status_changed,
    Event.LESSON_CONFLICT_OPENED: lesson_conflict_opened,
    Event.LESSON_CONFLICT_CLOSED: lesson_conflict_closed,
    Event.SKILL_RUN_STORED: skill_run_stored,
    Event.RUN_OUTCOME_REPORTED: run_outcome_reported,
    Event.INVESTIGATION_STORED: investigation_stored,
    Event.LEXICON_CHANGED: lexicon_changed,
    Event.DOCUMENT_REVOKED: document_revoked,
}


@pytest.fixture
def scenario(
    request: pytest.FixtureRequest, frozen_clock: Callable[[datetime], Any]
) -> Callable[[Event], tuple[Write, Written]]:
    frozen_clock(NOW)
    return lambda event: SCENARIOS[event](request)


def test_every_event_has_a_scenario() -> None:
    assert set(SCENARIOS) == set(Event)


@pytest.mark.django_db
@pytest.mark.parametrize("event", list(Event))
def test_an_event_reaches_every_subscriber_inside_the_writers_transaction(
    event: Event,
    scenario: Callable[[Event], tuple[Write, Written]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write, written = scenario(event)
    expected = [qualified(handler) for handler in dispatch.subscribers(event)]
    reached: list[tuple[str, bool]] = []

    def spy(handler: Any) -> Any:
        def heard(**payload: Any) -> object:
            reached.append((qualified(handler), transaction.get_connection().in_atomic_block))
            return handler(**payload)

        return heard

    monkeypatch.setitem(
        dispatch._subscribers, event, [spy(handler) for handler in dispatch.subscribers(event)]
    )
    write()

    assert written()
    assert reached == [(name, True) for name in expected]


@pytest.mark.django_db
@pytest.mark.parametrize("event", list(Event))
def test_a_subscriber_that_fails_undoes_the_write(
    event: Event,
    scenario: Callable[[Event], tuple[Write, Written]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write, written = scenario(event)

    def refuse(**_: Any) -> None:
        raise Refused

    monkeypatch.setitem(dispatch._subscribers, event, [*dispatch.subscribers(event), refuse])
    with pytest.raises(Refused):
        write()
    assert not written()
