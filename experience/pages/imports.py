"""The console's import page: a file of cases, skills and lessons, or of knowledge documents, in
the commands' formats (docs/contracts.md), uploaded or pasted; every problem listed at once by item, line
and field, and nothing written unless there is none (``experience.review.console_imports``)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods

from experience.review.console_imports import (
    DOCUMENTS,
    ITEMS,
    Imported,
    ImportProblems,
    Problem,
    console_import,
)
from reviewconsole import inputs
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.links import item_url
from reviewconsole.permissions import ADD_CASE, ADD_DOCUMENT, holds
from reviewconsole.views import HtmxHttpRequest, console_view, render_page

MAX_IMPORT_FILE = 5 * 1024 * 1024
KIND_LABELS = {
    ITEMS: _("Cases, skills and lessons (the import_cases format)"),
    DOCUMENTS: _("Knowledge documents (the import_knowledge format)"),
}
KIND_PERMISSIONS = {ITEMS: ADD_CASE, DOCUMENTS: ADD_DOCUMENT}
ONE_SOURCE = _("Choose a file or paste the JSON, not both.")
NO_SOURCE = _("Choose a JSON file or paste its text.")
TOO_LARGE = _("is larger than 5 MB")


def importable_kinds(user: User) -> list[str]:
    return [kind for kind, permission in KIND_PERMISSIONS.items() if holds(user, permission)]


class ImportForm(forms.Form):
    kind = forms.ChoiceField(label=_("What the file holds"))
    file = forms.FileField(label=_("JSON file"), required=False)
    text = forms.CharField(
        label=_("Or paste the JSON"),
        required=False,
        strip=False,
        max_length=MAX_IMPORT_FILE,
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false"}),
    )

    def __init__(self, *args: Any, kinds: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["kind"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(kind, KIND_LABELS[kind]) for kind in kinds]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload, text = data.get("file"), data.get("text", "")
        if upload and text.strip():
            raise forms.ValidationError(ONE_SOURCE)
        if not upload and not text.strip():
            raise forms.ValidationError(NO_SOURCE)
        if upload and upload.size > MAX_IMPORT_FILE:
            self.add_error("file", TOO_LARGE)
        return data

    def source(self) -> str:
        """The JSON text, from the file or the paste."""
        upload = self.cleaned_data.get("file")
        if upload:
            raw = upload.read()
            try:
                return str(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise ValidationFailure("file", inputs.NOT_UTF8) from None
        return str(self.cleaned_data["text"])


def _created(result: Imported) -> list[dict[str, str]]:
    return [{"id": item_id, "url": item_url(item_id) or ""} for item_id in result.created]


@require_http_methods(["GET", "POST"])
@console_view()
def import_page(request: HtmxHttpRequest) -> HttpResponse:
    """Who may submit cases imports items; who may save documents imports documents; anyone
    else is refused here, and the services check again."""
    user = acting_user(request)
    kinds = importable_kinds(user)
    if not kinds:
        raise PermissionDenied
    form = ImportForm(request.POST or None, request.FILES or None, kinds=kinds)
    problems: list[Problem] = []
    result: Imported | None = None
    if request.method == "POST" and form.is_valid():
        try:
            text = form.source()
            items = inputs.load_json(text, field="file")
            result = console_import(
                kind=form.cleaned_data["kind"], items=items, actor=user, text=text
            )
        except ImportProblems as refused:
            problems = refused.problems
        except ValidationFailure as failure:
            problems = [Problem(None, None, failure.field, failure.message)]
        except PermissionRefused as refused:
            problems = [Problem(None, None, "", refused.message)]
    failed = bool(problems) or (request.method == "POST" and not form.is_valid())
    return render_page(
        request,
        "experience/import.html",
        {
            "form": form,
            "problems": problems,
            "result": result,
            "created": _created(result) if result else [],
            "message": gettext("Imported: %(created)d created, %(unchanged)d already there.")
            % {"created": len(result.created), "unchanged": len(result.unchanged)}
            if result
            else "",
        },
        status=422 if failed else 200,
    )
