"""Which role and tenants a person's OpenID Connect claims give them: the sign-on mapping.

Pure: plain values in, plain values out, no Django. The settings (``SSO_*``, docs/operations.md,
"Single sign-on") become one :class:`SignOnMapping`; :func:`mapped_access` reads a person's
validated claims through it at every sign-in (``reviewconsole.services.user_sign_on`` applies
the answer and audits each change).

The rules, also in docs/roles.md:

- The groups are the values of one claim (``groups`` unless told), a list of strings (a single
  string counts as a list of one). Each configured group names one role; a person in several
  gets the first of admin, operator, reviewer that one of their groups names. Agents never sign
  on: the mapping may not name the agent role, and nothing in the claims sets staff or superuser
  status (staff follows the role, as everywhere; superusers are made on the shell).
- Tenants come from the groups the tenant mapping names (a group may name ``*``: every tenant,
  deployment-wide) and from the values of an optional tenant claim (tenant names themselves).
  When no tenant mapping is configured at all, a signed-on person works deployment-wide (a
  single-tenant installation needs none); once one is, a person it gives no tenant is refused,
  never made deployment-wide by default.
- No group, no role: a person whose groups name no role is refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# The roles a sign-on may give, in the order that decides between several: the first wins.
SIGN_ON_ROLES = ("admin", "operator", "reviewer")
# A tenant mapping's value for "every tenant": the person works deployment-wide.
ALL_TENANTS = "*"

# Why a sign-in is refused once the provider vouched for the person (the codes the login page,
# the log and the tests share).
NO_ROLE = "no_role"
NO_TENANT = "no_tenant"
INACTIVE = "inactive"


@dataclass(frozen=True)
class SignOnMapping:
    """The configured mapping: group → role, group → tenants, and which claims hold them."""

    role_groups: Mapping[str, str] = field(default_factory=dict)
    tenant_groups: Mapping[str, Sequence[str]] = field(default_factory=dict)
    groups_claim: str = "groups"
    tenant_claim: str = ""

    def __post_init__(self) -> None:
        wrong = sorted({role for role in self.role_groups.values() if role not in SIGN_ON_ROLES})
        if wrong:
            raise ValueError(
                f"the sign-on role mapping names {', '.join(wrong)}: a group may give only "
                f"{', '.join(SIGN_ON_ROLES)}"
            )

    @property
    def maps_tenants(self) -> bool:
        return bool(self.tenant_groups) or bool(self.tenant_claim)


@dataclass(frozen=True)
class MappedAccess:
    """What the claims give. ``tenants`` None: deployment-wide; an empty set: no tenant."""

    role: str | None
    tenants: frozenset[str] | None
    groups: tuple[str, ...]

    @property
    def refusal(self) -> str | None:
        if self.role is None:
            return NO_ROLE
        if self.tenants is not None and not self.tenants:
            return NO_TENANT
        return None


def claim_values(claims: Mapping[str, Any], name: str) -> tuple[str, ...]:
    """The strings a claim holds: a list of strings, or one string; anything else is none."""
    if not name:
        return ()
    value = claims.get(name)
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(sorted({item for item in value if isinstance(item, str) and item}))
    return ()


def mapped_access(claims: Mapping[str, Any], mapping: SignOnMapping) -> MappedAccess:
    groups = claim_values(claims, mapping.groups_claim)
    named = {mapping.role_groups[group] for group in groups if group in mapping.role_groups}
    role = next((candidate for candidate in SIGN_ON_ROLES if candidate in named), None)
    mapped = [group for group in groups if group in mapping.role_groups]
    if not mapping.maps_tenants:
        return MappedAccess(role=role, tenants=None, groups=tuple(mapped))
    tenants: set[str] = set(claim_values(claims, mapping.tenant_claim))
    for group in groups:
        if group in mapping.tenant_groups:
            tenants.update(mapping.tenant_groups[group])
            mapped.append(group)
    matched = tuple(sorted(set(mapped)))
    if ALL_TENANTS in tenants:
        return MappedAccess(role=role, tenants=None, groups=matched)
    return MappedAccess(role=role, tenants=frozenset(tenants), groups=matched)


def parse_role_groups(text: str) -> dict[str, str]:
    """A JSON object ``{"GROUP": "ROLE", ...}`` (the environment's form; JSON, so a group may be
    an LDAP name with commas and equals signs in it)."""
    value = json.loads(text) if text.strip() else {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError('the role mapping must be a JSON object {"GROUP": "ROLE", ...}')
    return value


def parse_tenant_groups(text: str) -> dict[str, tuple[str, ...]]:
    """A JSON object ``{"GROUP": ["TENANT", ...], ...}`` (a single tenant may stand for its list;
    ``"*"``: every tenant)."""
    value = json.loads(text) if text.strip() else {}
    if not isinstance(value, dict):
        raise ValueError('the tenant mapping must be a JSON object {"GROUP": ["TENANT"], ...}')
    found: dict[str, tuple[str, ...]] = {}
    for group, tenants in value.items():
        listed = [tenants] if isinstance(tenants, str) else tenants
        if not isinstance(listed, list) or not all(isinstance(t, str) and t for t in listed):
            raise ValueError(f"the tenant mapping of {group!r} must be a tenant or a list of them")
        found[str(group)] = tuple(listed)
    return found
