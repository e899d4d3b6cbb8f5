"""The import format of knowledge documents, validated into frozen values.

The format is described in docs/contracts.md, Import formats.

Pure: no Django imports. Every error names its JSON path; text no database stores, integers
beyond ±2**53 and deep nesting are refused (``reviewconsole.inputs``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from knowledge.domain import sha256_hex, validate_requirements
from reviewconsole.errors import ValidationFailure
from reviewconsole.inputs import check_tree, db_integer
from reviewconsole.itemids import ItemId
from reviewconsole.scopes import validate_scope_value
from reviewconsole.timeparse import (
    parse_aware_datetime,
    parse_optional_aware_datetime,
    to_utc_iso,
)

MAX_TITLE = 300
MAX_TEXT = 20_000
MAX_SOURCE = 500
MAX_RULE_KEY = 100

DOC_KEY = re.compile(r"[a-z0-9][a-z0-9_-]{0,99}")
FIELDS = frozenset(
    {
        "doc_key",
        "version",
        "tenant",
        "brand",
        "stores",
        "campaign",
        "kind",
        "rule_key",
        "title",
        "text",
        "source",
        "valid_from",
        "valid_to",
        "published_at",
        "approved",
        "revoked",
        "requirements",
    }
)
REQUIRED = FIELDS - {"rule_key", "valid_to", "approved", "revoked", "requirements"}


@dataclass(frozen=True)
class DocumentContent:
    doc_key: str
    version: int
    tenant: str
    brand: str
    stores: tuple[str, ...]
    campaign: str
    kind: str
    rule_key: str
    title: str
    text: str
    source: str
    valid_from: datetime
    valid_to: datetime | None
    published_at: datetime
    requirements: dict[str, Any]

    @property
    def public_id(self) -> str:
        return str(ItemId.document(self.doc_key, self.version))

    def canonical(self) -> dict[str, Any]:
        return {
            "doc_key": self.doc_key,
            "version": self.version,
            "tenant": self.tenant,
            "brand": self.brand,
            "stores": sorted(self.stores),
            "campaign": self.campaign,
            "kind": self.kind,
            "rule_key": self.rule_key or None,
            "title": self.title,
            "text": self.text,
            "source": self.source,
            "valid_from": to_utc_iso(self.valid_from),
            "valid_to": to_utc_iso(self.valid_to),
            "published_at": to_utc_iso(self.published_at),
            "requirements": self.requirements,
        }

    def content_hash(self) -> str:
        return sha256_hex(self.canonical())


@dataclass(frozen=True)
class DocumentImport:
    content: DocumentContent
    approved: bool
    revoked: bool


def _text(obj: dict[str, Any], name: str, limit: int, *, required: bool = True) -> str:
    value = obj.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValidationFailure(name, "must be a non-empty string")
    if len(value) > limit:
        raise ValidationFailure(name, f"must be at most {limit} characters (got {len(value)})")
    return value.strip() if name != "text" else value


def _flag(obj: dict[str, Any], name: str) -> bool:
    value = obj.get(name, False)
    if not isinstance(value, bool):
        raise ValidationFailure(name, "must be true or false")
    return value


def parse_document(obj: object) -> DocumentImport:
    if not isinstance(obj, dict):
        raise ValidationFailure("", "each document must be a JSON object")
    check_tree(obj)
    unknown = sorted(set(obj) - FIELDS)
    if unknown:
        raise ValidationFailure(unknown[0], "is not a field of a knowledge document")
    for name in sorted(REQUIRED):
        if name not in obj:
            raise ValidationFailure(name, "is required")
    doc_key = obj["doc_key"]
    if not isinstance(doc_key, str) or not DOC_KEY.fullmatch(doc_key):
        raise ValidationFailure("doc_key", "must be a slug: lower-case letters, digits, - and _")
    # Stored in an integer column: PostgreSQL's holds at most 2**31-1.
    version = db_integer(obj["version"], field="version")
    stores = obj["stores"]
    if not isinstance(stores, list) or not stores:
        raise ValidationFailure("stores", "must be a non-empty list of store codes")
    clean_stores = [validate_scope_value(s, field=f"stores[{i}]") for i, s in enumerate(stores)]
    if len(set(clean_stores)) != len(clean_stores):
        raise ValidationFailure("stores", "lists a store twice")
    kind = obj["kind"]
    if kind not in ("rule", "case"):
        raise ValidationFailure("kind", 'must be "rule" or "case"')
    rule_key = obj.get("rule_key")
    if rule_key is not None and (not isinstance(rule_key, str) or len(rule_key) > MAX_RULE_KEY):
        raise ValidationFailure(
            "rule_key", f"must be a string of at most {MAX_RULE_KEY} characters"
        )
    valid_from = parse_aware_datetime(obj["valid_from"], field="valid_from")
    valid_to = parse_optional_aware_datetime(obj.get("valid_to"), field="valid_to")
    if valid_to is not None and valid_to <= valid_from:
        raise ValidationFailure("valid_to", "must be after valid_from")
    content = DocumentContent(
        doc_key=doc_key,
        version=version,
        tenant=validate_scope_value(obj["tenant"], field="tenant"),
        brand=validate_scope_value(obj["brand"], field="brand"),
        stores=tuple(sorted(clean_stores)),
        campaign=validate_scope_value(obj["campaign"], field="campaign"),
        kind=kind,
        rule_key=(rule_key or "").strip(),
        title=_text(obj, "title", MAX_TITLE),
        text=_text(obj, "text", MAX_TEXT),
        source=_text(obj, "source", MAX_SOURCE),
        valid_from=valid_from,
        valid_to=valid_to,
        published_at=parse_aware_datetime(obj["published_at"], field="published_at"),
        requirements=validate_requirements(obj.get("requirements", {})),
    )
    return DocumentImport(
        content=content, approved=_flag(obj, "approved"), revoked=_flag(obj, "revoked")
    )
