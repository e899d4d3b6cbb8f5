"""Console forms for the knowledge pages: list filters and the search preview."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django import forms
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from knowledge.models import DocumentKind
from knowledge.search import DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_LENGTH, KnowledgeContext
from reviewconsole.errors import ValidationFailure
from reviewconsole.timeparse import check_bounds

STATUS_CHOICES = [
    ("", _("Any status")),
    ("draft", _("Draft")),
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
    def initial_values(cls, now: datetime) -> dict[str, Any]:
        local = now.astimezone(ZoneInfo(settings.TIME_ZONE)).strftime("%Y-%m-%dT%H:%M:%S")
        return {
            "tenant": settings.DEMO_TENANT,
            "brand": settings.DEMO_BRAND,
            "timezone": settings.TIME_ZONE,
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
