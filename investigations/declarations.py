"""The tools an investigation may offer a model, as the model sees them. Pure: no Django.

Each takes only its own argument; the scope, the times and the facts are bound by whoever binds
the handler (``investigations.tools`` for the console, the replay's tools for evaluation).
"""

from __future__ import annotations

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
RUN_SKILL_DECLARATION = ToolDeclaration(
    RUN_SKILL,
    "Run a reviewed skill's read-only checks for this ticket. needs_review means the checks "
    "found current matching evidence and the skill's cases are leads to review; fallback means "
    "the skill does not apply.",
    string_schema({"skill_id": (1, MAX_SKILL_ID, "a skill id returned by retrieve_experience")}),
)
MEMORY_DECLARATIONS = (RETRIEVE_DECLARATION, RUN_SKILL_DECLARATION)
