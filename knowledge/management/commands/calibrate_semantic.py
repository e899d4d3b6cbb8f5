"""``calibrate_semantic FILE``: fit the vector branch's relevance curve for the configured model.

The file holds labelled questions over sets of items (``calibration-pairs/1``, the format of
``fixtures/calibration/pairs.json``). Each question is embedded with the configured embedder,
every item of its set judged against it (``semantic.calibration``), and the curves fitted by
maximum likelihood. ``--write PATH`` stores them in a calibration file (the model's entry
replaced, the others kept); point ``SEMANTIC_CALIBRATION_FILE`` at it. Nothing is read from
or written to the database.
"""

from __future__ import annotations

import json
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from knowledge.domain import expand, tokenize
from knowledge.postings import consistent_lexicon
from reviewconsole import clock
from reviewconsole.cli import JsonCommand
from reviewconsole.errors import ValidationFailure
from semantic import calibration, embedders

FORMAT = "calibration-pairs/1"


def labelled_sets(document: Any, lexicon: dict[str, str]) -> list[calibration.LabelledSet]:
    """The sets of a ``calibration-pairs/1`` document, each question's token shares worked out
    as the lexical branches count them (raw, and expanded with ``lexicon``)."""
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValidationFailure("format", f"must be {FORMAT!r}")
    sets = document.get("sets")
    if not isinstance(sets, list) or not sets:
        raise ValidationFailure("sets", "must be a non-empty list")
    found = []
    for s, one in enumerate(sets):
        where = f"sets[{s}]"
        if not isinstance(one, dict):
            raise ValidationFailure(where, "must be an object")
        items: dict[str, str] = {}
        for i, item in enumerate(one.get("items") or []):
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                raise ValidationFailure(f"{where}.items[{i}].id", "must be a string")
            if not isinstance(item.get("text"), str) or not item["text"].strip():
                raise ValidationFailure(f"{where}.items[{i}].text", "must be a non-empty string")
            items[item["id"]] = item["text"]
        if not items:
            raise ValidationFailure(f"{where}.items", "must be a non-empty list")
        queries: list[tuple[str, frozenset[str]]] = []
        shares: list[dict[str, float]] = []
        tokens = {i: (tokenize(t), tokenize(expand(t, lexicon))) for i, t in items.items()}
        for q, query in enumerate(one.get("queries") or []):
            text, answers = (query or {}).get("text"), (query or {}).get("answers")
            if not isinstance(text, str) or not text.strip():
                raise ValidationFailure(f"{where}.queries[{q}].text", "must be a non-empty string")
            if not isinstance(answers, list) or any(a not in items for a in answers):
                raise ValidationFailure(
                    f"{where}.queries[{q}].answers", "must list ids of the set's items"
                )
            queries.append((text, frozenset(answers)))
            raw, wide = tokenize(text), tokenize(expand(text, lexicon))
            shares.append(
                {
                    i: share
                    for i, (raw_i, wide_i) in tokens.items()
                    if (
                        share := max(
                            len(raw & raw_i) / len(raw) if raw else 0.0,
                            len(wide & wide_i) / len(wide) if wide else 0.0,
                        )
                    )
                }
            )
        if not queries:
            raise ValidationFailure(f"{where}.queries", "must be a non-empty list")
        found.append(calibration.LabelledSet(str(one.get("name", where)), items, queries, shares))
    return found


class Command(JsonCommand):
    help = "Fit the vector branch's relevance curve on labelled questions for the configured model."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("file", help="labelled questions (calibration-pairs/1)")
        parser.add_argument(
            "--write", metavar="PATH", help="store the fitted curves in this calibration file"
        )

    def execute_json(self, **options: Any) -> dict[str, Any]:
        try:
            document = json.loads(Path(options["file"]).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise ValidationFailure("file", f"cannot be read as JSON: {error}") from error
        embedder = embedders.configured()
        if embedder is None:
            raise CommandError("the vector branch is off (SEMANTIC_EMBEDDER=off): nothing to fit")
        _stamp, lexicon = consistent_lexicon()
        result = calibration.fitted(embedder, labelled_sets(document, dict(lexicon)))
        if options.get("write"):
            path = Path(options["write"])
            kept: dict[str, Any] = {}
            if path.exists():
                kept = json.loads(path.read_text(encoding="utf-8"))
            kept["format"] = "semantic-calibration/1"
            kept.setdefault("models", {})[result["model"]] = {
                "curve": result["curve"],
                "floor": result["floor"],
                "nulls": result["nulls"],
                "joint": result["joint"],
                "fitted_on": Path(options["file"]).name,
                "fitted_at": clock.now().date().isoformat(),
                "sets": result["sets"],
            }
            if result["lexical"] is not None:
                kept["lexical"] = result["lexical"]
            path.write_text(json.dumps(kept, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            result["written"] = str(path)
        return {"ok": True, **result}

    def render_text(self, result: dict[str, Any]) -> str:
        lines = [
            f"model: {result['model']}",
            f"vector curve: a={result['curve']['a']} b={result['curve']['b']}",
            "unrelated items' significance (question>item language: highest, mean, sd): "
            + "; ".join(
                f"{pair} {v['highest']}, {v['mean']}, {v['sd']}"
                for pair, v in result["nulls"].items()
            )
            + f" ({result['nothing_questions']} questions nothing answers)",
        ]
        if result.get("lexical"):
            lines.append(f"lexical curve: a={result['lexical']['a']} b={result['lexical']['b']}")
        for one in result["sets"]:
            lines.append(
                f"{one['set']}: {one['answers_reaching_floor']}/{one['answers']} answers reach the "
                f"floor, {one['other_items_reaching_floor']} other items do; "
                f"{one['nothing_questions_answered']}/{one['nothing_questions']} questions "
                "nothing answers would be answered by meaning"
            )
        if result.get("written"):
            lines.append(f"written to {result['written']}")
        return "\n".join(lines)
