"""Console forms for the knowledge pages: list filters, the search preview, and documents."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms
from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.utils import timezone
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from knowledge.models import Document, DocumentKind
from knowledge.schema import (
    MAX_RULE_KEY,
    MAX_SOURCE,
    MAX_TEXT,
    MAX_TITLE,
    DocumentContent,
    parse_document,
)
from knowledge.search import DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_LENGTH, KnowledgeContext
from reviewconsole import clock
from reviewconsole.errors import ValidationFailure
from reviewconsole.formfields import (
    ScopeInput,
    ZonedDateTimeField,
    ZonedDateTimeInput,
    offer_values,
)
from reviewconsole.reasons import MAX_REASON
from reviewconsole.tenancy import default_tenant
from reviewconsole.timeparse import check_bounds, to_utc_iso

STATUS_CHOICES = [
    ("", _("Any status")),
    ("draft", _("Draft, not submitted")),
    ("submitted", _("Submitted, awaiting approval")),
    ("approved", _("Approved")),
    ("revoked", _("Revoked")),
]
COMMON_ZONES = (
    "Asia/Shanghai",
    "Asia/Hong_Kong",
    "Asia/Taipei",
    "Asia/Singapore",
    "Asia/Tokyo",
    "UTC",
    "Europe/London",
    "Europe/Berlin",
    "America/New_York",
    "America/Los_Angeles",
)
FACT_LINE = re.compile(r"\s*([a-z][a-z0-9_]{0,63})\s*=\s*(.*?)\s*")


class DateTimeLocalInput(forms.DateTimeInput):
    """To the second: a default of "now" cut to the minute would hide what was published since."""

    input_type = "datetime-local"

    def __init__(self) -> None:
        super().__init__(format="%Y-%m-%dT%H:%M:%S", attrs={"step": "1"})


class DocumentFilterForm(forms.Form):
    q = forms.CharField(label=_("Title or key contains"), required=False, max_length=200)
    brand = forms.CharField(label=_("Brand"), required=False, max_length=64)
    campaign = forms.CharField(label=_("Campaign"), required=False, max_length=64)
    store = forms.CharField(label=_("Store"), required=False, max_length=64)
    kind = forms.ChoiceField(
        label=_("Kind"), required=False, choices=[("", _("Any kind")), *DocumentKind.choices]
    )
    status = forms.ChoiceField(label=_("Status"), required=False, choices=STATUS_CHOICES)

    def filters(self) -> dict[str, str]:
        return {name: str(value).strip() for name, value in self.cleaned_data.items() if value}


class SearchPreviewForm(forms.Form):
    """What an agent would send to ``search_knowledge``: a query and the ticket's context."""

    query = forms.CharField(
        label=_("Query"), max_length=MAX_QUERY_LENGTH, widget=forms.TextInput(attrs={"size": 50})
    )
    tenant = forms.CharField(label=_("Tenant"), required=False, max_length=64)
    brand = forms.CharField(label=_("Brand"), required=False, max_length=64)
    store = forms.CharField(label=_("Store"), required=False, max_length=64)
    campaign = forms.CharField(label=_("Campaign"), required=False, max_length=64)
    occurred_at = forms.CharField(
        label=_("Occurred at"),
        required=False,
        widget=DateTimeLocalInput(),
        help_text=_("When the customer's problem happened"),
    )
    known_at = forms.CharField(
        label=_("Known at"),
        required=False,
        widget=DateTimeLocalInput(),
        help_text=_("When the investigator looked; later documents are hidden"),
    )
    timezone = forms.CharField(
        label=_("Time zone"),
        max_length=64,
        widget=forms.TextInput(attrs={"list": "timezones"}),
        help_text=_("Applies to both times, e.g. Asia/Shanghai"),
    )
    channel = forms.CharField(label=_("Channel"), required=False, max_length=64)
    product = forms.CharField(label=_("Product"), required=False, max_length=64)
    basket_cents = forms.IntegerField(
        label=_("Basket (cents)"),
        required=False,
        min_value=0,
        help_text=_("Campaign goods in the basket, in cents"),
    )
    extra_facts = forms.CharField(
        label=_("Other facts"),
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("One name=value per line"),
    )
    limit = forms.IntegerField(
        label=_("Limit"), min_value=1, max_value=MAX_LIMIT, initial=DEFAULT_LIMIT
    )

    zones = COMMON_ZONES

    @classmethod
    def initial_values(
        cls, now: datetime, user: User | AnonymousUser | None = None
    ) -> dict[str, Any]:
        # The viewer's zone (the one every page shows times in), not the deployment's.
        zone = timezone.get_current_timezone_name()
        local = now.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%dT%H:%M:%S")
        tenant = default_tenant(user, settings.DEMO_TENANT)
        return {
            "tenant": tenant,
            # The demo brand belongs to the demo tenant; another tenant's user names their own.
            "brand": settings.DEMO_BRAND if tenant == settings.DEMO_TENANT else "",
            "timezone": zone,
            "occurred_at": local,
            "known_at": local,
            "limit": DEFAULT_LIMIT,
        }

    def clean_timezone(self) -> ZoneInfo:
        name = self.cleaned_data["timezone"].strip()
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise forms.ValidationError(
                _("is not a known time zone (e.g. Asia/Shanghai)")
            ) from None

    def clean_extra_facts(self) -> dict[str, str]:
        facts = {}
        for number, line in enumerate(self.cleaned_data["extra_facts"].splitlines(), start=1):
            if not line.strip():
                continue
            match = FACT_LINE.fullmatch(line)
            if match is None:
                raise forms.ValidationError(
                    _("line %(number)s: write name=value with a lower-case name"),
                    params={"number": number},
                )
            facts[match.group(1)] = match.group(2)
        return facts

    def _moment(self, name: str, zone: ZoneInfo) -> datetime | None:
        text = str(self.cleaned_data.get(name) or "").strip()
        if not text:
            return None
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            self.add_error(name, _("is not a date and time"))
            return None
        # A time typed into the form is in the chosen zone; one with an offset keeps it.
        moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)
        try:
            return check_bounds(moment, field=name)
        except ValidationFailure as failure:
            self.add_error(name, failure.message)
            return None

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        zone = data.get("timezone")
        if isinstance(zone, ZoneInfo):
            data["occurred"] = self._moment("occurred_at", zone)
            data["known"] = self._moment("known_at", zone)
        return data

    def context(self) -> KnowledgeContext:
        data = self.cleaned_data
        facts: dict[str, object] = dict(data["extra_facts"])
        for name in ("channel", "product"):
            if data.get(name):
                facts[name] = data[name].strip()
        if data.get("basket_cents") is not None:
            facts["basket_cents"] = data["basket_cents"]
        return KnowledgeContext(
            tenant=data.get("tenant", "").strip() or None,
            brand=data.get("brand", "").strip() or None,
            store=data.get("store", "").strip() or None,
            campaign=data.get("campaign", "").strip() or None,
            occurred_at=data.get("occurred"),
            known_at=data.get("known"),
            facts=facts,
            limit=data["limit"],
        )


# --- writing documents -----------------------------------------------------------------------

REQUIREMENT_LINE = re.compile(r"\s*([^:]+?)\s*:\s*(.*?)\s*")
VALUE = re.compile(r'\s*("[^"]*"|[^,"]*?)\s*(,|$)')
PLAIN_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")
RANGE = re.compile(
    r"(?:>=\s*(?P<min>-?\d+))|(?:<=\s*(?P<max>-?\d+))|(?P<low>-?\d+)\s*\.\.\s*(?P<high>-?\d+)"
)


def _value_text(value: object) -> str:
    """An allowed value as typed: integers bare, text that would read as one quoted."""
    if isinstance(value, int):
        return str(value)
    text = str(value)
    return f'"{text}"' if PLAIN_INTEGER.fullmatch(text) or "," in text else text


def requirements_text(requirements: dict[str, Any]) -> str:
    """Requirements as the form shows them: one ``name: values`` line per condition."""
    lines = []
    for name, constraint in requirements.items():
        if isinstance(constraint, dict):
            low, high = constraint.get("min"), constraint.get("max")
            if low is not None and high is not None:
                shown = f"{low}..{high}"
            else:
                shown = f">= {low}" if low is not None else f"<= {high}"
        else:
            shown = ", ".join(_value_text(value) for value in constraint)
        lines.append(f"{name}: {shown}")
    return "\n".join(lines)


def _allowed_value(text: str) -> str | int:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return text[1:-1]
    return int(text) if PLAIN_INTEGER.fullmatch(text) else text


def _values(text: str) -> list[str] | None:
    """Comma-separated values, a quoted one kept with its quotes; None when malformed."""
    parts, position = [], 0
    while True:
        match = VALUE.match(text, position)
        if match is None:
            return None
        parts.append(match.group(1))
        if not match.group(2):
            return parts
        position = match.end()


def requirements_parse(text: str) -> dict[str, Any]:
    """The inverse of ``requirements_text``; a malformed line is refused with its number.

    ``channel: miniapp, pos`` allows either value; ``basket_cents: >= 3000``, ``<= 5000`` or
    ``3000..5000`` is a range (bounds included). Values are text unless they are plain
    integers; quotes keep a value such as ``"001"`` text.
    """
    parsed: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        match = REQUIREMENT_LINE.fullmatch(line)
        if match is None or not match.group(2):
            raise ValidationFailure(
                "requirements", f"line {number}: write a condition as name: allowed values"
            )
        name, values = match.group(1), match.group(2)
        if name in parsed:
            raise ValidationFailure("requirements", f"line {number}: {name} is given twice")
        bounds = RANGE.fullmatch(values)
        if bounds is not None:
            low = bounds.group("min") or bounds.group("low")
            high = bounds.group("max") or bounds.group("high")
            parsed[name] = {
                **({"min": int(low)} if low is not None else {}),
                **({"max": int(high)} if high is not None else {}),
            }
        else:
            parts = _values(values)
            if parts is None or not all(parts):
                raise ValidationFailure(
                    "requirements",
                    f"line {number}: separate allowed values by commas; quote one that has a comma",
                )
            parsed[name] = [_allowed_value(part) for part in parts]
    return parsed


class SecondsDateTimeInput(ZonedDateTimeInput):
    """To the second: a new version keeps its base's validity exactly, seconds included."""

    def __init__(self) -> None:
        super().__init__(attrs={"step": "1"})

    def format_value(self, value: Any) -> str | None:
        if isinstance(value, datetime) and timezone.is_aware(value):
            return timezone.localtime(value).strftime("%Y-%m-%dT%H:%M:%S")
        return super().format_value(value)


class DocumentForm(forms.Form):
    """A new document, or (with ``base``) the next version of one: the whole content, checked
    by the import format's rules so that every error names its field. Times are typed in the
    console's time zone; scope fields suggest the values in use (``offer_values``)."""

    doc_key = forms.CharField(
        label=_("Document key"),
        max_length=100,
        help_text=_("Lower-case letters, digits, - and _; the same key for every version"),
    )
    title = forms.CharField(label=_("Title"), max_length=MAX_TITLE)
    kind = forms.ChoiceField(label=_("Kind"), choices=DocumentKind.choices)
    tenant = forms.CharField(label=_("Tenant"), max_length=64)
    brand = forms.CharField(label=_("Brand"), max_length=64)
    campaign = forms.CharField(label=_("Campaign"), max_length=64)
    stores = forms.CharField(
        label=_("Stores"),
        max_length=2000,
        help_text=_("Store codes separated by commas, e.g. store-001, store-004"),
    )
    rule_key = forms.CharField(
        label=_("Rule slot"),
        required=False,
        max_length=MAX_RULE_KEY,
        help_text=_("Documents of one slot with different requirements are shown as a conflict"),
    )
    source = forms.CharField(
        label=_("Source"), max_length=MAX_SOURCE, help_text=_("Where the text comes from")
    )
    text = forms.CharField(
        label=_("Text"), max_length=MAX_TEXT, widget=forms.Textarea(attrs={"rows": 8})
    )
    requirements = forms.CharField(
        label=_("Requirements"),
        required=False,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text=_(
            "One condition per line: channel: miniapp, pos — or a range: basket_cents: >= 3000, "
            "<= 5000 or 3000..5000. Empty: the rule applies to every purchase in its scope."
        ),
    )
    valid_from = ZonedDateTimeField(label=_("Valid from"), widget=SecondsDateTimeInput)
    valid_to = ZonedDateTimeField(label=_("Valid to"), required=False, widget=SecondsDateTimeInput)
    published_at = ZonedDateTimeField(
        label=_("Published at"), required=False, widget=SecondsDateTimeInput
    )
    change_note = forms.CharField(
        label=_("Change note"),
        required=False,
        max_length=MAX_REASON,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_(
            "What this version changes and why; required when you submit it for review, "
            "optional while it is a draft"
        ),
    )

    def __init__(
        self,
        *args: Any,
        base: Document | None = None,
        scope_values: Callable[[], Mapping[str, Iterable[str]]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.base = base
        self.published_given = False
        self.content: DocumentContent | None = None
        if base is not None:
            # The key is the base's: a new version never moves to another key.
            del self.fields["doc_key"]
        zone = self.fields["valid_to"].help_text
        self.fields["valid_to"].help_text = format_lazy("{} · {}", _("Empty: open-ended"), zone)
        self.fields["published_at"].help_text = format_lazy(
            "{} · {}",
            _("When this version becomes known; empty means the moment it is saved"),
            zone,
        )
        if scope_values is not None:
            offer_values(self, scope_values)
            # The stores field lists several codes; its suggestions are the store codes in use.
            self.fields["stores"].widget = ScopeInput(attrs=self.fields["stores"].widget.attrs)
            self.fields["stores"].widget.options = lambda: scope_values().get("store", ())

    @classmethod
    def initial_for(cls, base: Document | None, stores: list[str], tenant: str) -> dict[str, Any]:
        if base is None:
            return {"tenant": tenant, "kind": DocumentKind.RULE}
        return {
            "title": base.title,
            "kind": base.kind,
            "tenant": base.tenant,
            "brand": base.brand,
            "campaign": base.campaign,
            "stores": ", ".join(stores),
            "rule_key": base.rule_key,
            "source": base.source,
            "text": base.text,
            "requirements": requirements_text(base.requirements),
            "valid_from": base.valid_from,
            "valid_to": base.valid_to,
            # A new version is published when its author says, never when the last one was.
            "published_at": None,
        }

    def clean_requirements(self) -> dict[str, Any]:
        try:
            return requirements_parse(self.cleaned_data["requirements"])
        except ValidationFailure as failure:
            raise forms.ValidationError(failure.message) from None

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.errors:
            return data
        published = data.get("published_at")
        self.published_given = published is not None
        raw: dict[str, Any] = {
            "doc_key": self.base.doc_key if self.base else data["doc_key"].strip(),
            "version": self.base.version if self.base else 1,
            "tenant": data["tenant"].strip(),
            "brand": data["brand"].strip(),
            "campaign": data["campaign"].strip(),
            "stores": [s.strip() for s in data["stores"].split(",") if s.strip()],
            "kind": data["kind"],
            "rule_key": data["rule_key"].strip() or None,
            "title": data["title"],
            "text": data["text"],
            "source": data["source"],
            "valid_from": to_utc_iso(data["valid_from"]),
            "valid_to": to_utc_iso(data.get("valid_to")),
            "published_at": to_utc_iso(published or clock.now()),
            "requirements": data["requirements"],
        }
        try:
            self.content = parse_document(raw).content
        except ValidationFailure as failure:
            self.add_failure(failure)
        return data

    def add_failure(self, failure: ValidationFailure) -> None:
        """A refusal of the content (here or by a service) as an error on the field it names."""
        root = failure.field.split(".")[0].split("[")[0]
        if root == "version":
            root = "doc_key"
        self.add_error(root if root in self.fields else None, failure.message)

    def changes(self) -> dict[str, Any]:
        """What a new version sets: every content field but its key, version and (unless the
        author gave one) its publication time."""
        assert self.content is not None
        skipped = {"doc_key", "version"} | (set() if self.published_given else {"published_at"})
        return {
            name: getattr(self.content, name)
            for name in self.content.__dataclass_fields__
            if name not in skipped
        }


class DocumentSubmitForm(forms.Form):
    change_note = forms.CharField(label=_("Change note"), max_length=MAX_REASON, required=False)


class DocumentReviewForm(forms.Form):
    decision = forms.ChoiceField(
        choices=[("approve", _("Approve")), ("reject", _("Reject"))], label=_("Decision")
    )
    reason = forms.CharField(label=_("Reason"), max_length=MAX_REASON, required=False)


class DocumentRevokeForm(forms.Form):
    reason = forms.CharField(label=_("Reason"), max_length=MAX_REASON, required=False)
    previewed_runs = forms.CharField(required=False, max_length=100_000)
    previewed_skills = forms.CharField(required=False, max_length=100_000)
