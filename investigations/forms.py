"""The console's investigation form: a ticket and its scope, times and facts."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from investigations.services import MAX_TEXT
from knowledge.forms import SearchPreviewForm
from reviewconsole.scopes import SCOPE_FIELDS


class InvestigationForm(SearchPreviewForm):
    """The search preview's context fields (scope, times, time zone, facts), plus the ticket's
    text and release; the model sees the text, the runner binds the rest."""

    query = None  # type: ignore[assignment]
    limit = None  # type: ignore[assignment]
    text = forms.CharField(
        label=_("Ticket"),
        max_length=MAX_TEXT,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("The customer's words, as the ticket has them"),
    )
    deployment = forms.CharField(label=_("Release"), required=False, max_length=64)

    field_order = [
        "text",
        "tenant",
        "brand",
        "store",
        "campaign",
        "deployment",
        "occurred_at",
        "known_at",
        "timezone",
        "channel",
        "product",
        "basket_cents",
        "extra_facts",
    ]

    def investigation_arguments(self) -> dict[str, Any]:
        data = self.cleaned_data
        facts: dict[str, object] = dict(data["extra_facts"])
        for name in ("channel", "product"):
            if data.get(name):
                facts[name] = data[name].strip()
        if data.get("basket_cents") is not None:
            facts["basket_cents"] = data["basket_cents"]
        scope = {name: (data.get(name) or "").strip() or None for name in SCOPE_FIELDS}
        return {
            "text": data["text"],
            "scope": scope,
            "occurred_at": data.get("occurred"),
            "known_at": data.get("known"),
            "facts": facts,
        }
