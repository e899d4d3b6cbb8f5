"""Incident identity, over plain values.

- **Incident identity**: a merge maps an alias incident id to a canonical one inside one tenant
  and brand (``MERGE_SCOPE``); an incident's canonical id follows the merges to the end
  (``canonical_incident``). ``incident_merge`` stores every merge resolved to its root, so the
  end is one lookup away: the SQL form (``curation.selectors.incidents.canonical_incident_expression``)
  looks up that one row, and a test holds the two forms together. Support is the number of
  distinct canonical incidents, never the number of summaries.
"""

from __future__ import annotations

from collections.abc import Mapping

from reviewconsole.errors import ValidationFailure

# --- incident identity -------------------------------------------------------------------------

MERGE_SAME = "these incident ids already name one incident"
# The columns a merge holds within: a case's incident is looked up among its tenant and brand's.
MERGE_SCOPE = ("tenant", "brand")


def canonical_incident(incident: str, merges: Mapping[str, str]) -> str:
    """Follow alias → canonical merges to the end (a cycle, which merges never make, stops)."""
    seen = {incident}
    current = incident
    while current in merges:
        current = merges[current]
        if current in seen:
            break
        seen.add(current)
    return current


def merge_plan(alias: str, into: str, merges: Mapping[str, str]) -> tuple[str, str]:
    """The (alias root, canonical root) a merge of ``alias`` into ``into`` records.

    Roots, not the ids typed, so every incident keeps exactly one canonical id however merges
    are chained.
    """
    alias_root = canonical_incident(alias, merges)
    into_root = canonical_incident(into, merges)
    if alias_root == into_root:
        raise ValidationFailure("alias", MERGE_SAME)
    return alias_root, into_root
