"""The registry of read-only tools a skill recipe may call, and the handlers bound to them.

A handler receives the recipe's arguments plus the *current* scope and knowledge context from
the executor; nothing in a recipe can reach the scope, so a memory cannot widen where it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser, User

from experience.core.domain import StringArgument, ToolSpec
from knowledge.search import KnowledgeContext, search_knowledge

SEARCH_KNOWLEDGE = "search_knowledge"
MAX_QUERY = 200


@dataclass(frozen=True)
class CallContext:
    """What the executor hands every tool: the current scope and the caller's ticket context."""

    scope: Mapping[str, str]
    occurred_at: datetime | None
    known_at: datetime | None
    facts: Mapping[str, object] = field(default_factory=dict)
    actor: User | AnonymousUser | None = None  # whose permission and tenants a tool reads with


Handler = Callable[[Mapping[str, str], CallContext], dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    spec: ToolSpec
    handler: Handler


def search_knowledge_handler(arguments: Mapping[str, str], context: CallContext) -> dict[str, Any]:
    return search_knowledge(
        arguments["query"],
        KnowledgeContext(
            tenant=context.scope.get("tenant"),
            brand=context.scope.get("brand"),
            store=context.scope.get("store"),
            campaign=context.scope.get("campaign"),
            occurred_at=context.occurred_at,
            known_at=context.known_at,
            facts=dict(context.facts),
        ),
        actor=context.actor,
    )


SEARCH_KNOWLEDGE_SIGNATURE = ToolSpec(
    name=SEARCH_KNOWLEDGE, arguments={"query": StringArgument(1, MAX_QUERY)}
)


def default_registry() -> dict[str, Tool]:
    return {SEARCH_KNOWLEDGE: Tool(SEARCH_KNOWLEDGE_SIGNATURE, search_knowledge_handler)}


def tool_specs(registry: Mapping[str, Tool] | None = None) -> dict[str, ToolSpec]:
    """What recipe validation needs: the names and arguments, not the handlers."""
    registry = default_registry() if registry is None else registry
    return {name: tool.spec for name, tool in registry.items()}
