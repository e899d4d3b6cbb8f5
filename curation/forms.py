"""Console forms for intake and curation."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django import forms
from django.utils.functional import lazy
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from curation.domain.threads import (
    COUNTER_USES,
    DIAGNOSIS,
    MAX_COUNTER_ENTRIES,
    OBSERVATION,
    OUTCOME,
    CandidateDraft,
    CounterDraft,
    Pick,
    Unit,
)
from curation.models import LinkStatus, ProposalStatus, ReReviewReason, ReReviewStatus
from experience.cases.schema import MAX_WHEN
from reviewconsole.errors import ValidationFailure
from reviewconsole.formfields import ZonedDateTimeField
from reviewconsole.reasons import MAX_REASON
from reviewconsole.scopes import SCOPE_FIELDS


def _counter_label(n: int) -> str:
    return gettext("Counterevidence %(n)s") % {"n": n}


# Translated when shown, not when imported: "%" on a lazy message would fix it in English.
counter_label = lazy(_counter_label, str)

USE_CHOICES = [
    ("", _("— not used")),
    (OBSERVATION, _("Observation")),
    (DIAGNOSIS, _("Diagnosis evidence")),
    *((use, counter_label(n)) for n, use in enumerate(COUNTER_USES, start=1)),
    (OUTCOME, _("Outcome evidence")),
]


def _reason_field(label: Any = None, *, required: bool = True) -> forms.CharField:
    return forms.CharField(
        label=label or _("Reason"),
        required=required,
        max_length=MAX_REASON,
        widget=forms.Textarea(attrs={"rows": 2}),
    )


class ThreadImportForm(forms.Form):
    file = forms.FileField(label=_("Thread file (JSON)"))


def use_field(key: str) -> str:
    return f"use__{key}"


def excerpt_field(key: str) -> str:
    return f"excerpt__{key}"


class CandidateForm(forms.Form):
    """Scope, identity and statements typed by the operator, and one choice per message.

    Nothing is filled in as a conclusion: the statements start empty and no message is picked.
    Only the tenant starts filled in, as the thread's: a candidate built from a thread belongs to
    the thread's tenant and is refused with any other.
    """

    tenant = forms.CharField(label=_("Tenant"), max_length=64)
    brand = forms.CharField(label=_("Brand"), max_length=64)
    store = forms.CharField(label=_("Store"), max_length=64)
    campaign = forms.CharField(label=_("Campaign"), max_length=64)
    deployment = forms.CharField(label=_("Deployment"), max_length=64)
    incident = forms.CharField(label=_("Incident id"), max_length=200)
    title = forms.CharField(label=_("Title"), max_length=300)
    summary = forms.CharField(
        label=_("Summary"),
        required=False,
        max_length=20_000,
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    valid_from = ZonedDateTimeField(label=_("Valid from"))
    valid_to = ZonedDateTimeField(label=_("Valid to"))
    diagnosis = forms.CharField(
        label=_("Diagnosis statement"),
        required=False,
        max_length=20_000,
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    outcome = forms.CharField(
        label=_("Outcome statement"),
        required=False,
        max_length=20_000,
        widget=forms.Textarea(attrs={"rows": 2}),
    )

    def __init__(self, *args: Any, units: Sequence[Unit], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.units = list(units)
        for n in range(1, MAX_COUNTER_ENTRIES + 1):
            self.fields[f"counter-{n}-hypothesis"] = forms.CharField(
                label=_("Hypothesis"), required=False, max_length=20_000
            )
            self.fields[f"counter-{n}-statement"] = forms.CharField(
                label=_("What refutes it"), required=False, max_length=20_000
            )
            self.fields[f"counter-{n}-refutes"] = forms.CharField(
                label=_("How far the refutation reaches"), required=False, max_length=20_000
            )
        for unit in self.units:
            self.fields[use_field(unit.key)] = forms.ChoiceField(
                label=_("Use %(key)s as") % {"key": unit.key}, choices=USE_CHOICES, required=False
            )
            self.fields[excerpt_field(unit.key)] = forms.CharField(
                label=_("Excerpt of %(key)s (empty: the whole text)") % {"key": unit.key},
                required=False,
                max_length=20_000,
                widget=forms.Textarea(attrs={"rows": 1}),
            )

    def counter_rows(self) -> list[dict[str, Any]]:
        return [
            {
                "number": n,
                "hypothesis": self[f"counter-{n}-hypothesis"],
                "statement": self[f"counter-{n}-statement"],
                "refutes": self[f"counter-{n}-refutes"],
            }
            for n in range(1, MAX_COUNTER_ENTRIES + 1)
        ]

    def scope_fields(self) -> list[forms.BoundField]:
        return [self[name] for name in SCOPE_FIELDS]

    def picks(self) -> list[Pick]:
        data = self.cleaned_data
        return [
            Pick(unit.key, data[use_field(unit.key)], data.get(excerpt_field(unit.key), ""))
            for unit in self.units
            if data.get(use_field(unit.key))
        ]

    def draft(self) -> CandidateDraft:
        data = self.cleaned_data
        valid_from: datetime = data["valid_from"]
        valid_to: datetime = data["valid_to"]
        return CandidateDraft(
            scope={name: data[name].strip() for name in SCOPE_FIELDS},
            incident=data["incident"].strip(),
            title=data["title"].strip(),
            summary=data["summary"].strip(),
            valid_from=valid_from.isoformat(),
            valid_to=valid_to.isoformat(),
            diagnosis=data["diagnosis"].strip(),
            counterevidence=tuple(
                CounterDraft(
                    hypothesis=data[f"counter-{n}-hypothesis"].strip(),
                    statement=data[f"counter-{n}-statement"].strip(),
                    refutes=data[f"counter-{n}-refutes"].strip(),
                )
                for n in range(1, MAX_COUNTER_ENTRIES + 1)
            ),
            outcome=data["outcome"].strip(),
        )

    def add_failure(self, failure: ValidationFailure) -> None:
        """Show a service's refusal next to the field it names, or above the form."""
        self.add_error(self.field_of(failure.field), failure.message)

    def field_of(self, path: str) -> str | None:
        if path.startswith("scope."):
            path = path.removeprefix("scope.")
        for prefix, template in (("use[", "use__{}"), ("excerpt[", "excerpt__{}")):
            if path.startswith(prefix) and path.endswith("]"):
                path = template.format(path[len(prefix) : -1])
        path = {"diagnosis.statement": "diagnosis", "outcome.statement": "outcome"}.get(path, path)
        return path if path in self.fields else None


class LinkResolveForm(forms.Form):
    decision = forms.ChoiceField(
        choices=[
            ("same_incident", _("Same incident")),
            ("different", _("Different incidents")),
        ]
    )
    canonical = forms.CharField(label=_("Keep this incident id"), required=False, max_length=200)
    reason = _reason_field()
    next = forms.CharField(required=False, max_length=500, widget=forms.HiddenInput())


class IncidentMergeForm(forms.Form):
    tenant = forms.CharField(label=_("Tenant"), max_length=64)
    brand = forms.CharField(label=_("Brand"), max_length=64)
    alias = forms.CharField(label=_("Incident id to merge"), max_length=200)
    into = forms.CharField(label=_("Into incident id"), max_length=200)
    reason = _reason_field()


class RecertifyForm(forms.Form):
    valid_from = ZonedDateTimeField(label=_("New version valid from"))
    valid_to = ZonedDateTimeField(label=_("New version valid to"))


class ReasonForm(forms.Form):
    reason = _reason_field()


class ProposalAdoptForm(forms.Form):
    title = forms.CharField(label=_("Skill title"), max_length=300)
    when = forms.CharField(
        label=_("When it applies"), max_length=MAX_WHEN, widget=forms.Textarea(attrs={"rows": 3})
    )
    query_1 = forms.CharField(label=_("Step 1: search_knowledge query"), max_length=200)
    query_2 = forms.CharField(
        label=_("Step 2: search_knowledge query (optional)"), required=False, max_length=200
    )
    query_3 = forms.CharField(
        label=_("Step 3: search_knowledge query (optional)"), required=False, max_length=200
    )

    def queries(self) -> list[str]:
        return [
            self.cleaned_data[f"query_{n}"] for n in (1, 2, 3) if self.cleaned_data[f"query_{n}"]
        ]


class LinkFilterForm(forms.Form):
    status = forms.ChoiceField(
        label=_("Status"), required=False, choices=[("", _("Any status")), *LinkStatus.choices]
    )


class ReReviewFilterForm(forms.Form):
    reason = forms.ChoiceField(
        label=_("Why"), required=False, choices=[("", _("Any reason")), *ReReviewReason.choices]
    )
    status = forms.ChoiceField(
        label=_("Status"),
        required=False,
        choices=[("", _("Open or pending")), *ReReviewStatus.choices],
    )


class ProposalFilterForm(forms.Form):
    status = forms.ChoiceField(
        label=_("Status"), required=False, choices=[("", _("Any status")), *ProposalStatus.choices]
    )
