"""Two versions of a document, rendered field by field for people: its title, kind, scope,
validity, source, requirements and text as a reader sees them on the page, each compared word by
word (``textsearch.worddiff``: English by words, Chinese by characters). The document page and
the re-review queue show a version beside the one before it through ``version_diff``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import dateformat, timezone
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from knowledge.models import Document
from knowledge.selectors import document_stores
from textsearch.worddiff import FieldDiff, field_diffs

# --- requirements as a table -------------------------------------------------------------------

# Facts the search preview asks for by name; any other fact shows its own name.
FACT_LABELS = {
    "channel": _("Channel"),
    "product": _("Product"),
    "basket_cents": _("Basket (cents)"),
}


@dataclass(frozen=True)
class RequirementRow:
    name: str
    label: str
    allowed: str


def _allowed(constraint: Any) -> str:
    if isinstance(constraint, dict):
        low, high = constraint.get("min"), constraint.get("max")
        if low is not None and high is not None:
            return gettext("from %(min)s to %(max)s") % {"min": low, "max": high}
        if low is not None:
            return gettext("at least %(min)s") % {"min": low}
        return gettext("at most %(max)s") % {"max": high}
    return gettext(" or ").join(str(value) for value in constraint)


def requirement_rows(requirements: dict[str, Any]) -> list[RequirementRow]:
    """Each condition as a row a person reads: the fact, and the values it allows."""
    return [
        RequirementRow(name, str(FACT_LABELS.get(name, name)), _allowed(constraint))
        for name, constraint in sorted(requirements.items())
    ]


# --- a version beside another --------------------------------------------------------------------


def _time(value: datetime | None) -> str:
    # As the page shows every time: in the viewer's zone.
    if value is None:
        return gettext("open")
    return dateformat.format(timezone.localtime(value), "Y-m-d H:i T")


def document_fields(document: Document) -> list[tuple[str, str, str]]:
    """A version's content as (name, label, text) rows, each as the document page shows it."""
    requirements = "\n".join(
        f"{row.label}: {row.allowed}" for row in requirement_rows(document.requirements)
    )
    return [
        ("title", gettext("Title"), document.title),
        ("kind", gettext("Kind"), document.get_kind_display()),
        ("rule_key", gettext("Rule slot"), document.rule_key or "—"),
        ("tenant", gettext("Tenant"), document.tenant),
        ("brand", gettext("Brand"), document.brand),
        ("campaign", gettext("Campaign"), document.campaign),
        ("stores", gettext("Stores"), ", ".join(document_stores(document))),
        ("valid_from", gettext("Valid from"), _time(document.valid_from)),
        ("valid_to", gettext("Valid to"), _time(document.valid_to)),
        ("published_at", gettext("Published"), _time(document.published_at)),
        ("source", gettext("Source"), document.source),
        ("requirements", gettext("Requirements"), requirements or gettext("none")),
        ("text", gettext("Text"), document.text),
    ]


@dataclass(frozen=True)
class VersionDiff:
    """``new`` beside ``old``: the fields that changed, word by word, and those that did not."""

    old: Document
    new: Document
    fields: list[FieldDiff]

    @property
    def changed(self) -> list[FieldDiff]:
        return [field for field in self.fields if field.changed]

    @property
    def unchanged(self) -> list[str]:
        return [field.label for field in self.fields if not field.changed]

    @property
    def ins_label(self) -> str:
        return gettext("added in v%(version)s") % {"version": self.new.version}

    @property
    def del_label(self) -> str:
        return gettext("removed in v%(version)s") % {"version": self.new.version}


def version_diff(old: Document, new: Document) -> VersionDiff:
    return VersionDiff(old, new, field_diffs(document_fields(old), document_fields(new)))
