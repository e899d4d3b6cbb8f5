"""The conversation on a knowledge document version's page: its review threads, the rounds of
its review, and sending a draft back to the operator who saved it (``knowledge.services.
document_changes_request``; a new version saved from it answers). The threads' writes are
``reviewconsole.conversations``; these views parse the form, call one service and go back to
the page, where a refusal is said with the field it names."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_POST

from knowledge.models import Document
from knowledge.selectors import document_get_visible
from knowledge.services import document_changes_request, document_subject
from reviewconsole import conversations
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.permissions import ADD_DOCUMENT, APPROVE_DOCUMENT, VIEW_DOCUMENT
from reviewconsole.views import HtmxHttpRequest, console_view, finish, or_404

# What a thread on a document version may be about.
FIELDS = ("title", "text", "requirements", "valid_from", "valid_to")


class ChangesForm(forms.Form):
    note = forms.CharField(max_length=conversations.MAX_COMMENT, required=False)
    anchor = forms.CharField(max_length=200, required=False)


class ThreadForm(forms.Form):
    op = forms.ChoiceField(
        choices=[("open", "open"), ("reply", "reply"), ("resolve", "resolve"), ("reopen", "reopen")]
    )
    thread = forms.IntegerField(required=False, min_value=1)
    body = forms.CharField(max_length=conversations.MAX_COMMENT, required=False)
    anchor = forms.CharField(max_length=200, required=False)


def document_conversation(document: Document, user: User, new_version_url: str) -> dict[str, Any]:
    """What the document page shows of its conversation (``_conversations.html``)."""
    subject = document_subject(document)
    talk = conversations.conversation_of(subject)
    threads = conversations.thread_views(talk, document.public_id)
    draft = not document.approved and not document.revoked
    author = user.pk == document.created_by_id
    decider = user.has_perm(APPROVE_DOCUMENT)
    anchors = [("", conversations.anchor_label(""))] + [
        (f"field:{name}", conversations.anchor_label(f"field:{name}")) for name in FIELDS
    ]
    rounds = talk.rounds
    return {
        "threads": threads,
        "open_threads": sum(1 for t in threads if t.open),
        "rounds": rounds if len(rounds) > 1 or any(r.requests for r in rounds) else [],
        "open_request": talk.open_request,
        "changes_url": reverse("knowledge:tenant-document-changes", args=document.url_args),
        "threads_url": reverse("knowledge:tenant-document-threads", args=document.url_args),
        "revise_url": new_version_url if draft and user.has_perm(ADD_DOCUMENT) else "",
        "can_request_changes": decider and draft and not author,
        "can_take_part": author or decider,
        "anchor_choices": anchors,
        "blocked_as_it_stands": [],
    }


def _visible(request: HtmxHttpRequest, doc_key: str, version: int, tenant: str) -> Document:
    return or_404(document_get_visible(doc_key, version, acting_user(request), tenant))


def _said(request: HtmxHttpRequest, error: ValidationFailure) -> None:
    messages.error(request, f"{error.field}: {error}")


@require_POST
@console_view(VIEW_DOCUMENT)
def document_changes(
    request: HtmxHttpRequest, tenant: str, doc_key: str, version: int
) -> HttpResponse:
    """Send the draft back to the operator who saved it, with the posted note."""
    document = _visible(request, doc_key, version, tenant)
    form = ChangesForm(request.POST)
    form.is_valid()
    try:
        document_changes_request(
            document=document,
            actor=acting_user(request),
            note=form.cleaned_data.get("note") or "",
            anchor=form.cleaned_data.get("anchor") or "",
        )
    except PermissionRefused as error:
        raise PermissionDenied(str(error)) from None
    except ValidationFailure as error:
        _said(request, error)
        return finish(request, document.get_absolute_url())
    author = document.created_by.username if document.created_by else ""
    messages.success(request, gettext("Sent back to %(who)s with your comment.") % {"who": author})
    return finish(request, document.get_absolute_url())


@require_POST
@console_view(VIEW_DOCUMENT)
def document_threads(
    request: HtmxHttpRequest, tenant: str, doc_key: str, version: int
) -> HttpResponse:
    """Open, answer, resolve or reopen a thread on the version."""
    document = _visible(request, doc_key, version, tenant)
    form = ThreadForm(request.POST)
    if not form.is_valid():
        messages.error(request, gettext("That comment could not be read; nothing was saved."))
        return finish(request, document.get_absolute_url())
    data = form.cleaned_data
    subject = document_subject(document)
    actor = acting_user(request)
    try:
        number = conversations.thread_act(subject=subject, op=data["op"], data=data, actor=actor)
    except PermissionRefused as error:
        raise PermissionDenied(str(error)) from None
    except ValidationFailure as error:
        _said(request, error)
        return finish(request, document.get_absolute_url() + "#conversation")
    return finish(request, f"{document.get_absolute_url()}#thread-{number}")
