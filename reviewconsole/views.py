"""The view toolkit of every app (access, page or fragment, paging, diffs) and the audit pages."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import wraps
from typing import Any, Protocol, TypeVar, cast

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Page, Paginator
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods
from django_htmx.http import HttpResponseClientRedirect
from django_htmx.middleware import HtmxDetails

from reviewconsole import clock
from reviewconsole.errors import PermissionRefused
from reviewconsole.forms import EventFilterForm, TimeZoneForm, action_label
from reviewconsole.itemrefs import item_of, item_titles
from reviewconsole.links import RUN_PAGE
from reviewconsole.models import Action, Event
from reviewconsole.permissions import VIEW_EVENT
from reviewconsole.selectors import events_csv_rows, events_filtered
from reviewconsole.timezones import SESSION_KEY as TIME_ZONE_KEY
from reviewconsole.timezones import chosen_zone

# Audit targets that are run ids, linked to the run's page (its URL name; the app is above this one).
RUN_TARGET_ACTIONS = frozenset({Action.RUN_OUTCOME.value, Action.RUN_FOLLOW_UP.value})
# A pair target (a near-duplicate pair: ``case:A~case:B``) names two items.
PAIR_SEPARATOR = "~"


def target_parts(target: str) -> list[str]:
    """The items an event's target names: both of a pair, else the target itself."""
    parts = target.split(PAIR_SEPARATOR)
    return parts if len(parts) == 2 and all(item_of(part) for part in parts) else [target]


EVENTS_PER_PAGE = 50


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


View = TypeVar("View", bound=Callable[..., HttpResponseBase])


def console_view(*perms: str) -> Callable[[View], View]:
    """Login required; the user must be a person in a console role and hold every permission.

    Agents are service accounts: they authenticate for the API, never for these pages, even
    where they hold a permission a page needs (``user_set_role`` makes exactly the human roles
    staff).
    """

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HtmxHttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            user = request.user
            if not user.is_authenticated:
                if request.htmx:
                    # A fragment request after the session ended: reload into the login page.
                    login = redirect_to_login(request.get_full_path())
                    return HttpResponseClientRedirect(login["Location"])
                return redirect_to_login(request.get_full_path())
            if not user.is_staff or not user.has_perms(perms):
                raise PermissionDenied
            return view(request, *args, **kwargs)

        # Marks the page as guarded, with what it needs; outer decorators copy it (``wraps``).
        wrapped.console_permissions = perms  # type: ignore[attr-defined]
        return cast(View, wrapped)

    return decorator


def render_page(
    request: HtmxHttpRequest,
    template_name: str,
    context: dict[str, Any],
    *,
    partial: str | None = None,
    status: int = 200,
) -> HttpResponse:
    """The whole page, or only ``partial`` of it when htmx asks for a fragment."""
    if partial and request.htmx and not request.htmx.history_restore_request:
        template_name = f"{template_name}#{partial}"
    response = render(request, template_name, context, status=status)
    patch_vary_headers(response, ("HX-Request",))
    return response


def paginate(request: HttpRequest, items: Any, per_page: int) -> Page[Any]:
    return Paginator(items, per_page).get_page(request.GET.get("page"))


def finish(request: HtmxHttpRequest, url: str) -> HttpResponse:
    """After a successful write, a full page load of ``url`` (Post/Redirect/Get).

    A form posted by htmx would swap the redirect's page into its target, so htmx is told to
    navigate instead.
    """
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return HttpResponseRedirect(url, status=303)


@contextmanager
def refusal_as_403() -> Iterator[None]:
    """A service's or selector's refusal (``permissions.require``) answered as a 403: pages
    translate the refusal, the rule stays where it is enforced."""
    try:
        yield
    except PermissionRefused as refused:
        raise PermissionDenied(refused.message) from None


Found = TypeVar("Found")


def or_404(item: Found | None) -> Found:
    """What a selector found, or 404: a missing item and one of a tenant the user may not see
    look the same."""
    if item is None:
        raise Http404
    return item


class TenantItem(Protocol):
    tenant: str

    def get_absolute_url(self) -> str: ...


Named = TypeVar("Named", bound=TenantItem)


def one_or_tenant_choice(
    request: HtmxHttpRequest, named: str, items: Sequence[Named]
) -> Named | HttpResponse:
    """The one item an id names among the tenants the user sees; when it names one in several
    (a deployment-wide user), a page linking to each tenant's; 404 when it names none.

    Ids chosen by callers (document keys, thread ids) are unique per tenant only
    (docs/architecture.md, Tenancy)."""
    if len(items) > 1:
        choices = [
            {
                "tenant": item.tenant,
                "url": item.get_absolute_url(),
                "title": getattr(item, "title", ""),
            }
            for item in items
        ]
        return render_page(request, "_tenant_choice.html", {"named": named, "choices": choices})
    return or_404(items[0] if items else None)


@dataclass(frozen=True)
class Condition:
    """One condition of a review decision as a page shows it: its name, a sentence, met or not."""

    name: str
    label: str
    met: bool


@dataclass(frozen=True)
class Checklist:
    items: list[Condition]

    @property
    def unmet(self) -> int:
        return sum(1 for item in self.items if not item.met)


def checklist_of(
    universe: Sequence[str], unmet: Iterable[str], labels: Mapping[str, object]
) -> Checklist:
    """Every condition of ``universe`` marked met or not, plus any other unmet name reported,
    each labelled from ``labels`` (the name itself where it has no label)."""
    unmet = list(unmet)
    names = [*universe, *(name for name in unmet if name not in universe)]
    return Checklist(
        [Condition(name, str(labels.get(name, name)), name not in unmet) for name in names]
    )


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "del", "hunk" or "same"
    text: str


def diff_lines(
    old: Sequence[str], new: Sequence[str], *, old_label: str, new_label: str
) -> list[DiffLine]:
    """A unified line diff of two versions, classified for display."""
    lines = list(difflib.unified_diff(old, new, old_label, new_label, lineterm="", n=3))
    result = []
    for line in lines[2:]:  # the ---/+++ header names the versions, which the page shows
        if line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        result.append(DiffLine(kind, line))
    return result


def account_origin(details: object) -> str:
    """Who created the account that decided (an approval, a restore): what the event recorded
    (``reviewconsole.accounts.provenance``); empty for events that record nothing of it."""
    if not isinstance(details, dict) or "account_created_by" not in details:
        return ""
    creator = details["account_created_by"]
    if not creator:
        return str(_("account created on the shell"))
    if details.get("account_password_by_creator"):
        return str(_("account created, with its password, by %(name)s") % {"name": creator})
    return str(_("account created by %(name)s") % {"name": creator})


def target_name(event: Event) -> str:
    """The name an event recorded for a target that is no item (a thread's title), shown beside
    its id; an item's title is read from the item itself (``item_titles``)."""
    details = event.details if isinstance(event.details, dict) else {}
    name = details.get("title")
    if not isinstance(name, str) or any(item_of(part) for part in target_parts(event.target)):
        return ""
    return name


@require_GET
@console_view(VIEW_EVENT)
def event_list(request: HtmxHttpRequest) -> HttpResponse:
    form = EventFilterForm(request.GET or None)
    filters = form.filters() if form.is_bound and form.is_valid() else {}
    with refusal_as_403():
        found = events_filtered(viewer=request.user, **filters)
    if form.is_bound and not form.is_valid():
        # Filters that cannot hold (a reversed date range) list nothing, beside their errors.
        return render_page(
            request,
            "reviewconsole/event_list.html",
            {"form": form, "page_obj": None, "events": [], "rows": [], "invalid": True},
            partial="event-results",
        )
    page = paginate(request, found, EVENTS_PER_PAGE)
    events = list(page.object_list)
    return render_page(
        request,
        "reviewconsole/event_list.html",
        {
            "form": form,
            "page_obj": page,
            "events": events,
            "rows": [
                {
                    "event": event,
                    "label": action_label(event.action),
                    "run_url": reverse(RUN_PAGE, args=[event.target])
                    if event.action in RUN_TARGET_ACTIONS and event.target
                    else "",
                    "targets": target_parts(event.target),
                    "target_name": target_name(event),
                    "account_origin": account_origin(event.details),
                }
                for event in events
            ],
            "item_titles": item_titles(
                (part for event in events for part in target_parts(event.target)), request.user
            ),
        },
        partial="event-results",
    )


@require_GET
@console_view(VIEW_EVENT)
def event_export(request: HtmxHttpRequest) -> StreamingHttpResponse | HttpResponse:
    form = EventFilterForm(request.GET or None)
    filters = form.filters() if form.is_bound and form.is_valid() else {}
    with refusal_as_403():
        lines = events_csv_rows(viewer=request.user, zone=chosen_zone(request), **filters)
    if form.is_bound and not form.is_valid():
        return render_page(
            request, "reviewconsole/event_list.html", {"form": form, "events": []}, status=400
        )
    stamp = clock.now().strftime("%Y%m%dT%H%M%SZ")
    response = StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.csv"'
    return response


# --- the time zone of the console's times ---------------------------------------------------------


def _safe_next(request: HttpRequest, target: str) -> str:
    allowed = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return target if target and allowed else "/"


@require_http_methods(["GET", "POST"])
@console_view()
def time_zone(request: HtmxHttpRequest) -> HttpResponse:
    """GET shows the zone every page uses; POST sets the user's choice (empty: the deployment's)."""
    if request.method == "POST":
        form = TimeZoneForm(request.POST)
        if form.is_valid():
            zone = form.cleaned_data["zone"]
            if zone:
                request.session[TIME_ZONE_KEY] = zone
            else:
                request.session.pop(TIME_ZONE_KEY, None)
            return finish(request, _safe_next(request, form.cleaned_data["next"]))
        status = 422
    else:
        form = TimeZoneForm(
            initial={
                "zone": request.session.get(TIME_ZONE_KEY, ""),
                "next": _safe_next(request, request.GET.get("next", "")),
            }
        )
        status = 200
    return render_page(
        request,
        "reviewconsole/time_zone.html",
        {"form": form, "zone": chosen_zone(request), "deployment_zone": settings.TIME_ZONE},
        status=status,
    )
