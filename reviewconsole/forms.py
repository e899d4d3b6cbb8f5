"""Forms of the console shell."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

from django import forms
from django.utils import timezone
from django.utils.functional import lazy
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Action
from reviewconsole.timeparse import check_bounds
from reviewconsole.timezones import zone_names


def action_label(code: str) -> str:
    """What the audit log calls an action, translated: the one vocabulary of its filter and its
    table (the code itself stays in the table's tooltip and in the CSV export)."""
    try:
        return gettext(str(Action(code).label))
    except ValueError:
        return code


def action_choices() -> list[tuple[str, object]]:
    return [("", _("Any action")), *((a.value, lazy(action_label, str)(a.value)) for a in Action)]


def _zone_choices() -> list[tuple[str, object]]:
    return [("", _("The deployment's time zone")), *((name, name) for name in zone_names())]


class TimeZoneForm(forms.Form):
    zone = forms.ChoiceField(label=_("Time zone"), required=False, choices=_zone_choices)
    next = forms.CharField(required=False, widget=forms.HiddenInput, max_length=2000)


class DateInput(forms.DateInput):
    input_type = "date"


class EventFilterForm(forms.Form):
    actor = forms.CharField(label=_("Actor"), required=False, max_length=150)
    action = forms.ChoiceField(label=_("Action"), required=False, choices=action_choices)
    target = forms.CharField(
        label=_("Target contains"),
        required=False,
        max_length=200,
    )
    date_from = forms.DateField(label=_("From"), required=False, widget=DateInput())
    date_to = forms.DateField(label=_("To (inclusive)"), required=False, widget=DateInput())

    def clean_date_from(self) -> date | None:
        return _bounded(self.cleaned_data.get("date_from"), "date_from")

    def clean_date_to(self) -> date | None:
        return _bounded(self.cleaned_data.get("date_to"), "date_to")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        start, end = data.get("date_from"), data.get("date_to")
        if start and end and end < start:
            self.add_error("date_to", _("must not be before the start date"))
        return data

    def filters(self) -> dict[str, Any]:
        """Selector arguments; dates are whole days in the console's time zone."""
        data = self.cleaned_data
        return {
            "actor": data.get("actor", "").strip(),
            "action": data.get("action", ""),
            "target": data.get("target", "").strip(),
            "since": _start_of(data["date_from"]) if data.get("date_from") else None,
            "until": _start_of(data["date_to"] + timedelta(days=1))
            if data.get("date_to")
            else None,
        }


def _bounded(day: date | None, field: str) -> date | None:
    """A day the console can filter on: its start lies within the dates the product accepts."""
    if day is not None:
        try:
            check_bounds(_start_of(day), field=field)
        except ValidationFailure as failure:
            raise forms.ValidationError(failure.message) from None
    return day


def _start_of(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))
