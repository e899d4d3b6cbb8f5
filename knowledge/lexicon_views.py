"""The lexicon page: the synonyms the expanded branch reads, grouped by their canonical word.

Operators whom no tenant limits add, change and remove terms here (``knowledge.services``
``synonym_set`` / ``synonym_delete``: audited, the indexes follow in the background); everyone
who may view the lexicon sees it. A bilingual pair (``coupon`` → 优惠券) lets a question in one
language find an item written in the other by its words.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.urls import reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods

from knowledge.models import Synonym
from knowledge.services import lexicon_editable, synonym_delete, synonym_set
from reviewconsole.errors import ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.permissions import CHANGE_SYNONYM, DELETE_SYNONYM, VIEW_SYNONYM
from reviewconsole.views import HtmxHttpRequest, console_view, finish, render_page
from semantic.calibration import language


class SynonymForm(forms.Form):
    term = forms.CharField(label=_("Term"), max_length=50)
    canonical = forms.CharField(label=_("Canonical word"), max_length=50)


class RemoveForm(forms.Form):
    term = forms.CharField(max_length=50)


def _groups(query: str) -> list[dict[str, object]]:
    rows = Synonym.objects.order_by("canonical", "term")
    if query:
        rows = rows.filter(term__icontains=query) | rows.filter(canonical__icontains=query)
    groups: dict[str, list[dict[str, str]]] = {}
    for synonym in rows:
        groups.setdefault(synonym.canonical, []).append(
            {"term": synonym.term, "language": language(synonym.term)}
        )
    return [
        {
            "canonical": canonical,
            "language": language(canonical),
            "terms": terms,
            "bilingual": len({t["language"] for t in terms} | {language(canonical)}) > 1,
        }
        for canonical, terms in groups.items()
    ]


@require_http_methods(["GET", "POST"])
@console_view(VIEW_SYNONYM)
def lexicon(request: HtmxHttpRequest) -> HttpResponse:
    user = acting_user(request)
    can_change = lexicon_editable(user, CHANGE_SYNONYM)
    can_remove = lexicon_editable(user, DELETE_SYNONYM)
    form = SynonymForm(request.POST if request.POST.get("action") == "set" else None)
    status = 200
    if request.method == "POST":
        removing = request.POST.get("action") == "remove"
        if not (can_remove if removing else can_change):
            # The page lets every viewer in; writing needs an operator no tenant limits.
            raise PermissionDenied
        try:
            if removing:
                removal = RemoveForm(request.POST)
                if not removal.is_valid():
                    raise ValidationFailure("term", "must name a term of the lexicon")
                synonym = Synonym.objects.filter(term=removal.cleaned_data["term"]).first()
                if synonym is None:
                    raise ValidationFailure("term", "is not in the lexicon")
                synonym_delete(synonym=synonym, actor=user)
                messages.success(
                    request,
                    gettext("Removed “%(term)s”. Searches follow once the index is rebuilt.")
                    % {"term": synonym.term},
                )
                return finish(request, reverse("knowledge:lexicon"))
            if form.is_valid():
                saved = synonym_set(
                    term=form.cleaned_data["term"],
                    canonical=form.cleaned_data["canonical"],
                    actor=user,
                )
                messages.success(
                    request,
                    gettext(
                        "Saved “%(term)s” → “%(canonical)s”. Searches follow once the index is rebuilt."
                    )
                    % {"term": saved.term, "canonical": saved.canonical},
                )
                return finish(request, reverse("knowledge:lexicon"))
        except ValidationFailure as failure:
            if form.is_bound:
                known = failure.field in form.fields
                form.add_error(failure.field if known else None, failure.message)
            else:
                messages.error(request, f"{failure.field}: {failure.message}")
        status = 422
    query = request.GET.get("q", "").strip()[:50]
    return render_page(
        request,
        "knowledge/lexicon.html",
        {
            "form": form,
            "groups": _groups(query),
            "query": query,
            "can_change": can_change,
            "can_remove": can_remove,
            "total": Synonym.objects.count(),
        },
        status=status,
    )
