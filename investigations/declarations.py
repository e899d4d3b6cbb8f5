"""The tools an investigation may offer a model, as the model sees them. Pure: no Django.

Each takes only its own argument; the scope, the times and the facts are bound by whoever binds
the handler (``investigations.tools`` for the console, the replay's tools for evaluation).
"""

from __future__ import annotations

from experience.core.prompts import MAX_INPUT_STRING, MAX_INPUTS, PromptTool
from investigations.domain import ToolDeclaration, string_schema

SEARCH_KNOWLEDGE = "search_knowledge"
RETRIEVE_EXPERIENCE = "retrieve_experience"
RUN_SKILL = "run_skill"
MAX_QUERY = 200
MAX_SKILL_ID = 80

SEARCH_DECLARATION = ToolDeclaration(
    SEARCH_KNOWLEDGE,
    "Search the approved business rules and confirmed historical cases of this ticket's "
    "campaign and store, valid when the problem occurred. Each evidence item has an id, a "
    "quote to cite verbatim and its conditions compared with the ticket's facts.",
    string_schema({"query": (1, MAX_QUERY, "what to look for, in the ticket's words")}),
)
RETRIEVE_DECLARATION = ToolDeclaration(
    RETRIEVE_EXPERIENCE,
    "Find reviewed investigation cases and check skills of exactly this ticket's scope. "
    "They are historical leads, never the cause of this ticket.",
    string_schema({"query": (1, MAX_QUERY, "what to look for, in the ticket's words")}),
)


def _run_skill_schema() -> dict[str, object]:
    schema = string_schema(
        {"skill_id": (1, MAX_SKILL_ID, "a skill id returned by retrieve_experience")}
    )
    # Only a prompt-form skill takes inputs; a fallback naming ``inputs.NAME`` says which.
    schema["properties"]["inputs"] = {
        "type": "object",
        "description": "a prompt-form skill's declared inputs (text from the ticket); "
        "omit for a recipe skill",
        "maxProperties": MAX_INPUTS,
        "additionalProperties": {"type": "string", "maxLength": MAX_INPUT_STRING},
    }
    return schema


RUN_SKILL_DECLARATION = ToolDeclaration(
    RUN_SKILL,
    "Run a reviewed skill for this ticket: a recipe skill's read-only checks, or a prompt "
    "skill's constrained sub-agent (pass its inputs). needs_review means the skill found "
    "current matching evidence and its cases are leads to review; fallback means the skill "
    "does not apply (missing lists inputs it needs).",
    _run_skill_schema(),
)
MEMORY_DECLARATIONS = (RETRIEVE_DECLARATION, RUN_SKILL_DECLARATION)

# The registered investigation tools as a prompt-form skill's declaration sees them: the two
# reads, and run_skill, which a prompt skill may not call (it stores a run of another skill,
# and a skill calling skills could call itself without end).
PROMPT_TOOLS = (
    PromptTool(SEARCH_KNOWLEDGE, read_only=True),
    PromptTool(RETRIEVE_EXPERIENCE, read_only=True),
    PromptTool(RUN_SKILL, read_only=False, why_not="it runs another skill and stores a run"),
)
