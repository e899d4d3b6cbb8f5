"""The import format of knowledge documents, validated into frozen values.

The format is described in docs/contracts.md, Import formats.

Pure: no Django imports. Every error names its JSON path; text no database stores, integers
beyond ±2**53 and deep nesting are refused (``reviewconsole.inputs``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from knowledge.domain import sha256_hex, validate_requirements
from reviewconsole.errors import ValidationFailure
from reviewconsole.fields import FieldChecks, every_failure
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


def _doc_key(value: object) -> str:
    if not isinstance(value, str) or not DOC_KEY.fullmatch(value):
        raise ValidationFailure("doc_key", "must be a slug: lower-case letters, digits, - and _")
    return value


def _stores(stores: object) -> tuple[str, ...]:
    if not isinstance(stores, list) or not stores:
        raise ValidationFailure("stores", "must be a non-empty list of store codes")
    clean = [validate_scope_value(s, field=f"stores[{i}]") for i, s in enumerate(stores)]
    if len(set(clean)) != len(clean):
        raise ValidationFailure("stores", "lists a store twice")
    return tuple(sorted(clean))


def _kind(kind: object) -> str:
    if kind not in ("rule", "case"):
        raise ValidationFailure("kind", 'must be "rule" or "case"')
    return str(kind)


def _rule_key(rule_key: object) -> str:
    if rule_key is not None and (not isinstance(rule_key, str) or len(rule_key) > MAX_RULE_KEY):
        raise ValidationFailure(
            "rule_key", f"must be a string of at most {MAX_RULE_KEY} characters"
        )
    return (rule_key or "").strip()


def _document(obj: object, checks: FieldChecks) -> DocumentImport | None:
    """The document ``obj`` is; None when ``checks`` kept a failure (it raises the first one in
    a parse)."""
    if not isinstance(obj, dict):
        raise ValidationFailure("", "each document must be a JSON object")
    check_tree(obj)
    item: dict[str, Any] = obj
    checks.unknown(item, FIELDS, "", "is not a field of a knowledge document")
    checks.require(item, tuple(sorted(REQUIRED)), "is required")
    v: dict[str, Any] = {
        "doc_key": checks.check("doc_key", lambda: _doc_key(item["doc_key"])),
        # Stored in an integer column: PostgreSQL's holds at most 2**31-1.
        "version": checks.check("version", lambda: db_integer(item["version"], field="version")),
        "stores": checks.check("stores", lambda: _stores(item["stores"])),
        "kind": checks.check("kind", lambda: _kind(item["kind"])),
        "rule_key": checks.check("rule_key", lambda: _rule_key(item.get("rule_key"))),
    }
    valid_from = checks.check(
        "valid_from", lambda: parse_aware_datetime(item["valid_from"], field="valid_from")
    )
    valid_to = checks.check(
        "valid_to",
        lambda: parse_optional_aware_datetime(item.get("valid_to"), field="valid_to"),
    )
    if valid_from is not None and valid_to is not None and valid_to <= valid_from:
        checks.fail(ValidationFailure("valid_to", "must be after valid_from"))
    for name in ("tenant", "brand", "campaign"):
        v[name] = checks.check(name, partial(validate_scope_value, item.get(name), field=name))
    v.update(
        {
            "title": checks.check("title", lambda: _text(item, "title", MAX_TITLE)),
            "text": checks.check("text", lambda: _text(item, "text", MAX_TEXT)),
            "source": checks.check("source", lambda: _text(item, "source", MAX_SOURCE)),
            "published_at": checks.check(
                "published_at",
                lambda: parse_aware_datetime(item["published_at"], field="published_at"),
            ),
            "requirements": checks.check(
                "requirements", lambda: validate_requirements(item.get("requirements", {}))
            ),
        }
    )
    approved = checks.check("approved", lambda: _flag(item, "approved"))
    revoked = checks.check("revoked", lambda: _flag(item, "revoked"))
    if checks.failures or valid_from is None:
        return None
    content = DocumentContent(**v, valid_from=valid_from, valid_to=valid_to)
    return DocumentImport(content=content, approved=bool(approved), revoked=bool(revoked))


def parse_document(obj: object) -> DocumentImport:
    document = _document(obj, FieldChecks())
    assert document is not None  # a parse raises its first failure
    return document


def document_failures(obj: object) -> list[ValidationFailure]:
    """Every field failure of one document (``parse_document`` raises the first of them)."""
    return every_failure(lambda checks: _document(obj, checks))
