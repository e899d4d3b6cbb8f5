"""Console forms for the experience pages."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django_stubs_ext import StrOrPromise

from experience.core.models import RunStatus, Status
from experience.pages.selectors import DEFAULT_SORT, QueueFilters
from reviewconsole.formfields import ScopeSelect
from reviewconsole.reasons import MAX_REASON

MAX_NOTE = 500

AGE_CHOICES = [
    ("", _("Any age")),
    ("1", _("Waiting over 1 day")),
    ("3", _("Waiting over 3 days")),
    ("7", _("Waiting over 7 days")),
    ("30", _("Waiting over 30 days")),
]
APPROVED_WITHIN_CHOICES = [
    ("", _("Approved at any time")),
    ("1", _("Approved in the last day")),
    ("7", _("Approved in the last 7 days")),
    ("30", _("Approved in the last 30 days")),
]
REVOKED_WITHIN_CHOICES = [
    ("", _("Revoked at any time")),
    ("7", _("Revoked in the last 7 days")),
    ("30", _("Revoked in the last 30 days")),
    ("90", _("Revoked in the last 90 days")),
]
SORT_CHOICES = [
    ("-submitted", _("Newest first")),
    ("submitted", _("Oldest first")),
    ("title", _("Title")),
    ("valid_to", _("Expiring first")),
    ("-approved", _("Recently approved")),
]


def _scope_filter(label: StrOrPromise, any_label: StrOrPromise) -> forms.CharField:
    """A scope filter offering the values that exist (the view gives them, ``offer_values``); a
    value typed into the address that none has still filters, and shows."""
    return forms.CharField(
        label=label, required=False, max_length=64, widget=ScopeSelect(any_label=any_label)
    )


class QueueFilterForm(forms.Form):
    text = forms.CharField(
        label=_("Search"),
        required=False,
        max_length=200,
        help_text=_("Words of the title, or part of an id or incident"),
        widget=forms.TextInput(attrs={"type": "search"}),
    )
    status = forms.ChoiceField(
        label=_("Status"),
        required=False,
        choices=[("", _("Any status")), *Status.choices],
        initial=Status.CANDIDATE,
    )
    kind = forms.ChoiceField(
        label=_("Type"),
        required=False,
        choices=[
            ("", _("Cases, skills and lessons")),
            ("case", _("Cases")),
            ("skill", _("Skills")),
            ("lesson", _("Lessons")),
        ],
    )
    brand = _scope_filter(_("Brand"), _("Any brand"))
    store = _scope_filter(_("Store"), _("Any store"))
    campaign = _scope_filter(_("Campaign"), _("Any campaign"))
    deployment = _scope_filter(_("Deployment"), _("Any deployment"))
    submitter = forms.CharField(label=_("Submitter"), required=False, max_length=150)
    age = forms.ChoiceField(label=_("Age"), required=False, choices=AGE_CHOICES)
    approved_within = forms.ChoiceField(
        label=_("Approved"), required=False, choices=APPROVED_WITHIN_CHOICES
    )
    revoked_within = forms.ChoiceField(
        label=_("Revoked"), required=False, choices=REVOKED_WITHIN_CHOICES
    )
    sort = forms.ChoiceField(label=_("Sort by"), required=False, choices=SORT_CHOICES)

    def queue_filters(self) -> QueueFilters:
        if not self.is_valid():
            return QueueFilters()
        data = self.cleaned_data
        return QueueFilters(
            status=data["status"],
            kind=data["kind"],
            brand=data["brand"].strip(),
            store=data["store"].strip(),
            campaign=data["campaign"].strip(),
            deployment=data["deployment"].strip(),
            submitter=data["submitter"].strip(),
            older_than_days=int(data["age"]) if data["age"] else None,
            approved_within_days=int(data["approved_within"]) if data["approved_within"] else None,
            revoked_within_days=int(data["revoked_within"]) if data["revoked_within"] else None,
            sort=data["sort"] or DEFAULT_SORT,
            text=data["text"].strip(),
        )


def _field_problems(form: forms.Form, own: dict[str, str]) -> list[tuple[str, str]]:
    """(field, message) for each invalid field of a bound ``form``; ``own`` words some fields'."""
    return [
        (name, own.get(name) or " ".join(str(message) for message in errors))
        for name, errors in form.errors.items()
    ]


class ReviewForm(forms.Form):
    """Approve or reject with a reason; an empty reason is refused by the review rules."""

    decision = forms.ChoiceField(choices=[("approve", _("Approve")), ("reject", _("Reject"))])
    reason = forms.CharField(
        label=_("Reason"),
        required=False,
        max_length=MAX_REASON,
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    # Decide although another reviewer holds a claim on the item (reviewconsole.claims).
    take_over = forms.BooleanField(required=False)

    def problems(self) -> list[tuple[str, str]]:
        """What is wrong with the posted decision, each named by its own field."""
        return _field_problems(self, {"decision": gettext("Choose approve or reject.")})


class RevokeForm(forms.Form):
    reason = forms.CharField(
        label=_("Reason for revoking"),
        required=False,
        max_length=MAX_REASON,
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    previewed_skills = forms.CharField(required=False, widget=forms.HiddenInput())
    previewed_runs = forms.CharField(required=False, widget=forms.HiddenInput())
    previewed_impact = forms.CharField(required=False, widget=forms.HiddenInput())

    def problems(self) -> list[tuple[str, str]]:
        return _field_problems(self, {})


class EvidenceCheckForm(forms.Form):
    key = forms.CharField(max_length=40)
    note = forms.CharField(label=_("Note"), required=False, max_length=MAX_NOTE)

    def problem(self) -> str:
        """One line naming each invalid field, e.g. ``note: Ensure this value has at most …``."""
        own = {"key": gettext("Name the evidence item to mark as checked.")}
        return " ".join(
            message if name == "key" else f"{name}: {message}"
            for name, message in _field_problems(self, own)
        )


class RunFilterForm(forms.Form):
    run_id = forms.CharField(label=_("Run id contains"), required=False, max_length=100)
    status = forms.ChoiceField(
        label=_("Status"), required=False, choices=[("", _("Any status")), *RunStatus.choices]
    )
    skill = forms.CharField(label=_("Skill id"), required=False, max_length=80)
    follow_up = forms.ChoiceField(
        label=_("Follow-up"),
        required=False,
        choices=[
            ("", _("Any run")),
            ("pending", _("To follow up")),
            ("done", _("Followed up")),
        ],
    )
