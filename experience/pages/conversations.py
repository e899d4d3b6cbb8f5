"""The conversation on an item's page: its review threads (beside the evidence they are anchored
to), the rounds of its review (each change request and the revision that answered it), the
request-changes form, and for a case the revision form.

The writes are ``experience.review.changes`` (request changes, resubmit) and
``reviewconsole.conversations`` (threads); these views parse the form, call one of them and go
back to the item's page, where a refusal is said with the field it names.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.urls import NoReverseMatch, reverse
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_http_methods, require_POST

from experience.cases.models import Case, Skill
from experience.core import domain
from experience.core.models import Status
from experience.core.review import ReviewRefused
from experience.lessons.models import Lesson
from experience.pages.checklists import refusal
from experience.review.changes import revision_data, subject_of
from reviewconsole import conversations
from reviewconsole.conversations import ThreadView, anchor_label
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.permissions import REVIEW_CASE
from reviewconsole.views import HtmxHttpRequest, console_view, finish, or_404, render_page

Item = Case | Skill | Lesson
View = Callable[..., HttpResponse]

SECTIONS = ("observations", "diagnosis", "counterevidence", "outcome")


class ChangesForm(forms.Form):
    note = forms.CharField(
        label=_("What should change"), max_length=conversations.MAX_COMMENT, required=False
    )
    anchor = forms.CharField(label=_("About"), max_length=200, required=False)


class ThreadForm(forms.Form):
    op = forms.ChoiceField(
        choices=[("open", "open"), ("reply", "reply"), ("resolve", "resolve"), ("reopen", "reopen")]
    )
    thread = forms.IntegerField(required=False, min_value=1)
    body = forms.CharField(max_length=conversations.MAX_COMMENT, required=False)
    anchor = forms.CharField(max_length=200, required=False)


def anchor_choices(evidence_keys: Sequence[str]) -> list[tuple[str, str]]:
    """What a thread or a change request may be anchored to on a case's page."""
    choices = [("", anchor_label(""))]
    choices += [(f"section:{name}", anchor_label(f"section:{name}")) for name in SECTIONS]
    choices += [(f"evidence:{key}", anchor_label(f"evidence:{key}")) for key in evidence_keys]
    return choices


def _url(kind: str, name: str, item: Item) -> str:
    try:
        return reverse(f"experience:{kind}-{name}", args=[item.digest])
    except NoReverseMatch:
        return ""


def conversation_context(
    item: Item,
    kind: str,
    user: User,
    *,
    evidence_keys: Sequence[str] = (),
    unmet: Sequence[str] = (),
) -> dict[str, Any]:
    """What the item page shows of its conversation (``_conversations.html``)."""
    subject = subject_of(item)
    talk = conversations.conversation_of(subject)
    rounds = talk.rounds
    threads = conversations.thread_views(talk, item.id)
    by_anchor: dict[str, list[ThreadView]] = {}
    for view in threads:
        if not view.earlier_version:
            by_anchor.setdefault(view.thread.anchor, []).append(view)
    is_submitter = user.pk == item.submitted_by_id
    reviewer = user.has_perm(REVIEW_CASE)
    candidate = item.status == Status.CANDIDATE
    revise_url = _url(kind, "revise", item)
    blocked = (
        domain.case_unmet_as_it_stands(
            unmet, diagnosis_evidence=sum(1 for k in evidence_keys if k.startswith("diagnosis/"))
        )
        if kind == "case" and candidate
        else []
    )
    return {
        "threads": threads,
        "threads_by_anchor": by_anchor,
        "open_threads": sum(1 for t in threads if t.open),
        "rounds": rounds if len(rounds) > 1 or any(r.requests for r in rounds) else [],
        "open_request": talk.open_request,
        "changes_url": _url(kind, "changes", item),
        "threads_url": _url(kind, "threads", item),
        "revise_url": revise_url if candidate and (is_submitter or reviewer) else "",
        "can_request_changes": reviewer and candidate and not is_submitter,
        "can_take_part": is_submitter or reviewer,
        "anchor_choices": anchor_choices(evidence_keys),
        "blocked_as_it_stands": refusal(blocked),
    }


def _said(request: HtmxHttpRequest, error: Exception) -> None:
    """A refused write, said on the page it returns to, naming the field."""
    if isinstance(error, ReviewRefused):
        for condition in refusal(error.unmet):
            messages.error(request, str(condition.label))
    elif isinstance(error, ValidationFailure):
        messages.error(request, f"{error.field}: {error}")
    else:
        messages.error(request, str(error))


@dataclass(frozen=True)
class ConversationViews:
    changes: View
    threads: View
    revise: View | None


def conversation_views(
    *,
    kind: str,
    view_permission: str,
    get_visible: Callable[[str, User], Any],
    request_changes: Callable[..., Any],
    resubmit: Callable[..., Item] | None = None,
) -> ConversationViews:
    """The conversation's views of one kind: each needs the kind's view permission, and the
    services check the rest (a reviewer of the kind, or the item's submitter)."""

    def visible(request: HtmxHttpRequest, digest: str) -> Any:
        return or_404(get_visible(digest, acting_user(request)))

    def changes(request: HtmxHttpRequest, digest: str) -> HttpResponse:
        item = visible(request, digest)
        form = ChangesForm(request.POST)
        form.is_valid()
        data = form.cleaned_data
        try:
            request_changes(
                **{kind: item},
                actor=acting_user(request),
                note=data.get("note") or "",
                anchor=data.get("anchor") or "",
            )
        except PermissionRefused as error:
            raise PermissionDenied(str(error)) from None
        except (ValidationFailure, ReviewRefused) as error:
            _said(request, error)
            return finish(request, item.get_absolute_url() + "#review-panel")
        messages.success(
            request,
            gettext("Sent back to %(who)s with your comment.")
            % {"who": item.submitted_by.username},
        )
        return finish(request, item.get_absolute_url())

    def threads(request: HtmxHttpRequest, digest: str) -> HttpResponse:
        item = visible(request, digest)
        form = ThreadForm(request.POST)
        if not form.is_valid():
            messages.error(request, gettext("That comment could not be read; nothing was saved."))
            return finish(request, item.get_absolute_url())
        data = form.cleaned_data
        subject = subject_of(item)
        actor = acting_user(request)
        try:
            number = conversations.thread_act(
                subject=subject, op=data["op"], data=data, actor=actor
            )
        except PermissionRefused as error:
            raise PermissionDenied(str(error)) from None
        except ValidationFailure as error:
            _said(request, error)
            return finish(request, item.get_absolute_url() + "#conversation")
        return finish(request, f"{item.get_absolute_url()}#thread-{number}")

    def revise(request: HtmxHttpRequest, digest: str) -> HttpResponse:
        assert resubmit is not None
        item = visible(request, digest)
        actor = acting_user(request)
        try:
            # Only who may resubmit sees the form (the service asks again on POST).
            conversations.require_resubmitter(subject_of(item), actor)
        except PermissionRefused as refused:
            raise PermissionDenied(str(refused)) from None
        error: ValidationFailure | None = None
        if request.method == "POST":
            text = str(request.POST.get("content", ""))
            try:
                data = json.loads(text)
            except ValueError:
                error = ValidationFailure("content", gettext("is not valid JSON"))
            else:
                try:
                    revision = resubmit(**{kind: item}, data=data, actor=actor)
                except PermissionRefused as refused:
                    raise PermissionDenied(str(refused)) from None
                except ReviewRefused as refused:
                    error = ValidationFailure("status", ", ".join(refused.unmet))
                except ValidationFailure as refused:
                    error = refused
                else:
                    messages.success(
                        request, gettext("Your revision is submitted for review again.")
                    )
                    return finish(request, revision.get_absolute_url())
        else:
            text = json.dumps(revision_data(item), ensure_ascii=False, indent=2)
            if item.status != Status.CANDIDATE:
                error = ValidationFailure("status", gettext("only a candidate is revised"))
        subject = subject_of(item)
        return render_page(
            request,
            "experience/item_revise.html",
            {
                "item": item,
                "item_type": kind,
                "content": text,
                "error": error,
                "open_request": conversations.open_change_request(subject),
                "rounds": conversations.rounds_of(subject),
            },
            status=422 if error is not None and request.method == "POST" else 200,
        )

    def named(view: View, action: str) -> View:
        view.__name__ = view.__qualname__ = f"{kind}_{action}"
        return view

    guarded = console_view(view_permission)
    return ConversationViews(
        changes=require_POST(guarded(named(changes, "changes"))),
        threads=require_POST(guarded(named(threads, "threads"))),
        revise=require_http_methods(["GET", "POST"])(guarded(named(revise, "revise")))
        if resubmit is not None
        else None,
    )
