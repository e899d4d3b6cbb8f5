"""After-action reviews: a candidate case drafted from a finished run's trace. Pure.

A draft says, from the trace alone: the goal (the ticket or the skill's purpose), the result
(status, reason, the verified answer if any), the key decisions (each step: tool, arguments,
status), why (what each step observed) and what is reusable. Every evidence item cites the run
and the step it came from (``run:R#step-N``, ``run:R#result``) and is left unchecked: only a
reviewer checks evidence. A run never confirms a cause, so each draft carries one refuted
hypothesis, "the lead alone is the cause", refuted by the run's own result; steps that found a
rule mismatch or nothing add theirs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

from experience.cases.schema import MAX_EXCERPT
from knowledge.domain import jaccard, tokenize

SKILL_RUN = "skill run"
INVESTIGATION = "investigation"
STEP_OF_INVESTIGATION = "a step of an investigation, reviewed with the investigation"
DRAFT_VALIDITY = timedelta(days=365)
MAX_TITLE = 300
# A draft at least this similar (Jaccard of title and summary tokens) to an open candidate of the
# same scope is the same lesson learned again: the run is attached to that candidate instead.
NEAR_DUPLICATE = Fraction(1, 2)
MISSES = frozenset({"no_match", "mismatch", "failed", "fallback"})


@dataclass(frozen=True)
class TraceStep:
    index: int
    tool: str
    arguments: Mapping[str, Any]
    status: str
    findings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Trace:
    kind: str
    run_id: str
    scope: Mapping[str, str]
    goal: str
    status: str
    reason: str
    answer: str
    finished_at: datetime
    steps: tuple[TraceStep, ...] = field(default_factory=tuple)


def source(run_id: str, step: int | None = None) -> str:
    return f"run:{run_id}#" + ("result" if step is None else f"step-{step}")


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def spoken(code: str) -> str:
    """A status code as words (``needs_review`` -> ``needs review``)."""
    return code.replace("_", " ")


def _arguments(arguments: Mapping[str, Any]) -> str:
    return ", ".join(f"{name}: {value}" for name, value in sorted(arguments.items()))


def _decision(step: TraceStep) -> str:
    # Steps are counted from 1, as people count them.
    return (
        f"step {step.index + 1}, {step.tool} ({_arguments(step.arguments)}): {spoken(step.status)}"
    )


def _reason(reason: str) -> str:
    """A run's reason without its leading code (``all_steps_passed: every step …``)."""
    code, separator, sentence = reason.partition(": ")
    return sentence if separator and code.isidentifier() else reason


def result_line(trace: Trace) -> str:
    parts = [f"ended {spoken(trace.status)}"]
    if trace.reason:
        parts.append(_reason(trace.reason))
    if trace.answer:
        parts.append(f"answer: {trace.answer}")
    return "; ".join(parts)


def draft_case(trace: Trace) -> dict[str, Any]:
    """The candidate case (import format) drafted from ``trace``."""
    decisions = [_decision(step) for step in trace.steps] or ["no step ran"]
    why = [
        f"step {step.index + 1} found {finding}"
        for step in trace.steps
        for finding in step.findings
    ]
    reusable = [
        f"{step.tool} ({_arguments(step.arguments)})"
        for step in trace.steps
        if step.status not in MISSES
    ]
    # One sentence a line; the case page keeps the lines.
    summary = "\n".join(
        [
            f"Goal: {trace.goal}.",
            f"Result: the {trace.kind} {result_line(trace)}.",
            "Key decisions: " + "; ".join(decisions) + ".",
            "Why: " + ("; ".join(why) if why else "no observation recorded") + ".",
            "Reusable: "
            + ("; ".join(reusable) if reusable else "nothing yet: no step found anything")
            + ".",
        ]
    )
    observations = [
        {
            "source_id": source(trace.run_id, step.index),
            "excerpt": _clip(f"{_decision(step)}: {finding}", MAX_EXCERPT),
        }
        for step in trace.steps
        for finding in (step.findings or ("no evidence returned",))
    ] or [{"source_id": source(trace.run_id), "excerpt": _clip(result_line(trace), MAX_EXCERPT)}]
    counter = [
        {
            "hypothesis": "the lead alone is the cause",
            "statement": f"the {trace.kind} ended {spoken(trace.status)}; it does not confirm a cause",
            "refutes": "a historical lead is never a confirmed cause; the current evidence decides",
            "evidence": [
                {
                    "source_id": source(trace.run_id),
                    "excerpt": _clip(result_line(trace), MAX_EXCERPT),
                }
            ],
        }
    ]
    for step in trace.steps:
        if step.status in MISSES and len(counter) < 3:
            counter.append(
                {
                    "hypothesis": f"{step.tool} ({_arguments(step.arguments)}) explains the ticket",
                    "statement": f"step {step.index + 1} ended {spoken(step.status)}",
                    "refutes": "this check found nothing that explains the ticket",
                    "evidence": [
                        {
                            "source_id": source(trace.run_id, step.index),
                            "excerpt": _clip(_decision(step), MAX_EXCERPT),
                        }
                    ],
                }
            )
    return {
        "type": "case",
        "scope": dict(trace.scope),
        "incident": f"run:{trace.run_id}",
        "title": _clip(f"AAR of {trace.kind} {trace.run_id}: {trace.goal}", MAX_TITLE),
        "summary": summary,
        "observations": observations,
        "diagnosis": {
            "statement": trace.answer
            or f"The run ended {spoken(trace.status)}: {_reason(trace.reason) or 'no reason given'}",
            "evidence": [
                {
                    "source_id": source(trace.run_id),
                    "excerpt": _clip(result_line(trace), MAX_EXCERPT),
                }
            ],
        },
        "counterevidence": counter,
        "valid_from": trace.finished_at.isoformat(),
        "valid_to": (trace.finished_at + DRAFT_VALIDITY).isoformat(),
    }


def near_duplicate_of(
    draft: Mapping[str, Any], candidates: Sequence[tuple[str, str]]
) -> str | None:
    """The id of the most similar open candidate ``(id, text)`` at or above the threshold."""
    tokens = tokenize(f"{draft['title']}\n{draft['summary']}")
    best: tuple[Fraction, str] | None = None
    for candidate_id, text in candidates:
        score = jaccard(tokens, tokenize(text))
        if score >= NEAR_DUPLICATE and (best is None or (score, candidate_id) > best):
            best = (score, candidate_id)
    return best[1] if best else None
