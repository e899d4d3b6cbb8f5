"""What every request argument means, with an example: the text an LLM reads in a tool's
input schema and a developer in the OpenAPI schema (docs/agents.md, Tool schemas).

``agentapi.schemas`` writes it beside each property's type (``RequestBody``'s schema hook).
"""

from __future__ import annotations

from typing import Any

from reviewconsole.itemids import CASE, SKILL
from reviewconsole.scopes import SCOPE_FIELDS

# A real answer needs every scope field: the schema lets one be left out so that leaving it out
# is answered (needs_context / fallback naming it) rather than refused.
SCOPE_NEEDED = "needed for an answer (left out: {status})"
SEARCH_SCOPE = SCOPE_NEEDED.format(status="needs_context")
MEMORY_SCOPE = SCOPE_NEEDED.format(status="fallback")

# name → (description, example). A field's own ``Field(description=…)`` wins over the text here;
# the example is added wherever the property has none.
ARGUMENTS: dict[str, tuple[str, Any]] = {
    "query": (
        "what the ticket is about, in the customer's or the agent's words",
        "小程序优惠券无法使用",
    ),
    "tenant": (f"the ticket's tenant (the company), exactly; {SEARCH_SCOPE}", "teahouse"),
    "brand": (f"the ticket's brand, exactly; {SEARCH_SCOPE}", "leaf-and-cup"),
    "store": (f"the store the ticket happened at, exactly; {SEARCH_SCOPE}", "store-002"),
    "campaign": (f"the campaign the ticket is about, exactly; {SEARCH_SCOPE}", "campaign-b"),
    "deployment": (
        f"the release of the ordering system the ticket happened on; {MEMORY_SCOPE}",
        "release-1",
    ),
    "occurred_at": (
        "when the ticket's problem happened: the rules valid then are the ones compared; "
        "needed for an answer (needs_context otherwise)",
        "2026-09-18T14:00:00+08:00",
    ),
    "known_at": (
        "when the ticket became known: only what was published by then is read; needed for "
        "an answer (needs_context otherwise)",
        "2026-09-18T14:10:00+08:00",
    ),
    "facts": (
        "the ticket's facts the rules' conditions are compared with, e.g. channel, product, "
        "basket_cents (integer cents); a fact a condition needs and you leave out makes that "
        "condition unknown",
        {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200},
    ),
    "limit": ("how many items to return at most", 5),
    "run_id": (
        "your id for this ticket's investigation: every read is recorded under it, and "
        "run_outcome reports on it; use one id per ticket, the same in every call about it; "
        "yours alone, opened in the scope's tenant by its first read (another account's or "
        "tenant's run of the same id is another run)",
        "ticket-4711",
    ),
    "now": ("the time validity is checked at; default: now", "2026-09-18T14:20:00+08:00"),
    "scope": (
        "where the current ticket happens, each field exactly: all five are needed for an "
        "answer; one left out is answered needs_context or fallback naming it in missing, never "
        "with a wider scope",
        dict(
            zip(
                SCOPE_FIELDS,
                ("teahouse", "leaf-and-cup", "store-002", "campaign-b", "release-1"),
                strict=True,
            )
        ),
    ),
    "skill_id": (
        "an approved skill's id (skill:<64 hex digits>), as retrieve_experience or "
        "experience_context returned it for this scope (an item of type skill); never made up",
        SKILL.prefix + "0" * 64,
    ),
    "inputs": (
        "a prompt-form skill's declared inputs by name (the skill's prompt.inputs); "
        "a recipe skill takes none",
        {"customer_words": "两杯水果茶，优惠券用不了"},
    ),
    "provider": ("the model that answers: scripted (deterministic) or live", "scripted"),
    "text": (
        "the ticket as written: the customer's complaint and what is known",
        "两杯水果茶，优惠券用不了",
    ),
    "max_calls": ("the most tool calls the investigation may make; default: 6", 6),
    "budget": ("tokens the block may use", 400),
    "note": (
        "what happened, in a sentence; default: empty",
        "the new product was added to campaign B",
    ),
    "type": ("always case", "case"),
    "incident": ("the ticket or incident reference", "INC-4711"),
    "title": ("a one-line title of the case", "Coupon refused for new products: campaign B list"),
    "summary": (
        "what happened, in a few sentences",
        "Campaign B's product list lacked the new tea.",
    ),
    "observations": (
        "what was seen, each with its source and an excerpt",
        [{"source_id": "thread:9#m1", "excerpt": "Customer: the coupon does not apply."}],
    ),
    "diagnosis": (
        "the diagnosis and the evidence for it",
        {
            "statement": "Campaign B's product list lacks the new product.",
            "evidence": [{"source_id": "thread:9#m4", "excerpt": "Ops: not in the campaign list."}],
        },
    ),
    "counterevidence": (
        "hypotheses considered and refuted, each with its evidence",
        [
            {
                "hypothesis": "The coupon had expired.",
                "statement": "The coupon was valid that day.",
                "refutes": "expiry",
                "evidence": [{"source_id": "coupon:77", "excerpt": "valid to 2026-09-30"}],
            }
        ],
    ),
    "valid_from": ("from when the case applies", "2026-09-01T00:00:00+08:00"),
    "valid_to": ("until when the case applies", "2026-12-31T23:59:59+08:00"),
    "supersedes": (
        "the id of a stored case this one replaces (case:<64 hex digits>)",
        CASE.prefix + "0" * 64,
    ),
    "source_id": ("where the excerpt comes from (a message, a document, a log)", "thread:9#m4"),
    "excerpt": ("the words quoted from the source, verbatim", "Ops: not in the campaign list."),
    "verified": ("ignored: an agent's evidence is always unchecked", False),
    "statement": ("the statement, in a sentence or two", "Campaign B's product list lacks it."),
    "evidence": (
        "the evidence, each with its source and an excerpt",
        [{"source_id": "thread:9#m4", "excerpt": "Ops: not in the campaign list."}],
    ),
    "hypothesis": ("the hypothesis considered", "The coupon had expired."),
    "refutes": ("what the counterevidence refutes", "expiry"),
}

# Field names that mean something else in one model (the run outcome's ``outcome``).
ARGUMENTS_BY_MODEL: dict[tuple[str, str], tuple[str, Any]] = {
    ("RunOutcomeRequest", "outcome"): (
        "what came of the leads read in run_id: resolved_by_lead (a lead was the cause), "
        "lead_was_wrong (it was not: reviewers look again) or unresolved",
        "resolved_by_lead",
    ),
    ("CaseProposal", "outcome"): (
        "what was done and what came of it, with its evidence",
        {
            "statement": "Added the product to campaign B; the coupon applies.",
            "evidence": [{"source_id": "thread:9#m9", "excerpt": "Customer: it works now."}],
        },
    ),
    ("CaseProposal", "scope"): (
        "the exact scope the case happened in: all five fields",
        dict(
            zip(
                SCOPE_FIELDS,
                ("teahouse", "leaf-and-cup", "store-002", "campaign-b", "release-1"),
                strict=True,
            )
        ),
    ),
}
# A ticket's scope (retrieval, skill runs, investigations): each tool names what is missing.
for _field in SCOPE_FIELDS:
    ARGUMENTS_BY_MODEL[("ExperienceScope", _field)] = (
        f"the ticket's {_field}, exactly; needed for an answer",
        ARGUMENTS[_field][1],
    )
# In a case's own scope every field is required by the schema itself.
for _field in SCOPE_FIELDS:
    ARGUMENTS_BY_MODEL[("CaseScope", _field)] = (
        f"the case's {_field}, exactly",
        ARGUMENTS[_field][1],
    )


def argument_docs(model: type, name: str) -> tuple[str, Any] | None:
    """The description and example of property ``name`` of request model ``model`` (or of the
    model it extends: an MCP tool's arguments extend the API's request body)."""
    for cls in model.__mro__:
        if (cls.__name__, name) in ARGUMENTS_BY_MODEL:
            return ARGUMENTS_BY_MODEL[(cls.__name__, name)]
    return ARGUMENTS.get(name)
