"""The console's user pages: the users an admin manages, with their role and tenants; creating a
user; changing a user's role, tenants or activity.

Only users who manage users reach them (``CHANGE_USER``, held by admins); the list and each user
are read through ``users_manageable_by``, so a user out of the admin's reach answers 404. Every
write is one of ``reviewconsole.services`` (``user_create``, ``user_update``), which checks the
rules again and records the audit events; an admin may not change their own role or deactivate
themselves, so no admin removes their own last admin role.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_GET, require_http_methods

from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.permissions import CHANGE_USER
from reviewconsole.selectors import user_rows, user_signs_on, user_visible
from reviewconsole.services import user_create, user_role, user_tenants, user_update
from reviewconsole.user_forms import UserChangeForm, UserCreateForm
from reviewconsole.views import HtmxHttpRequest, console_view, finish, or_404, render_page

USERS_PER_PAGE = 50


@require_GET
@console_view(CHANGE_USER)
def user_list(request: HtmxHttpRequest) -> HttpResponse:
    return render_page(
        request, "reviewconsole/user_list.html", {"rows": user_rows(acting_user(request))}
    )


@require_http_methods(["GET", "POST"])
@console_view(CHANGE_USER)
def user_new(request: HtmxHttpRequest) -> HttpResponse:
    actor = acting_user(request)
    form = UserCreateForm(request.POST or None, actor=actor)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            user = user_create(
                actor=actor,
                username=data["username"].strip(),
                role=data["role"],
                tenants=data["tenants"],
                password=data["password"] or None,
                profile={"email": data["email"]},
            )
        except ValidationFailure as failure:
            form.add_failure(failure)
        except PermissionRefused as refused:
            form.add_error(None, refused.message)
        else:
            messages.success(
                request, gettext("User %(name)s created.") % {"name": user.get_username()}
            )
            return finish(request, reverse("user-list"))
    return render_page(
        request,
        "reviewconsole/user_form.html",
        {"form": form, "subject": None},
        status=422 if form.is_bound else 200,
    )


@require_http_methods(["GET", "POST"])
@console_view(CHANGE_USER)
def user_edit(request: HtmxHttpRequest, username: str) -> HttpResponse:
    actor = acting_user(request)
    subject = or_404(user_visible(actor, username))
    if request.method == "POST":
        form = UserChangeForm(request.POST, actor=actor)
    else:
        form = UserChangeForm(
            initial={
                "role": user_role(subject),
                "tenants": user_tenants(subject),
                "is_active": subject.is_active,
            },
            actor=actor,
        )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            user_update(
                actor=actor,
                user=subject,
                role=data["role"],
                is_active=data["is_active"],
                tenants=data["tenants"],
            )
        except ValidationFailure as failure:
            form.add_failure(failure)
        except PermissionRefused as refused:
            form.add_error(None, refused.message)
        else:
            messages.success(
                request, gettext("User %(name)s saved.") % {"name": subject.get_username()}
            )
            return finish(request, reverse("user-list"))
    return render_page(
        request,
        "reviewconsole/user_form.html",
        {
            "form": form,
            "subject": subject,
            "own": subject.pk == actor.pk,
            "signed_on": user_signs_on(subject),
        },
        status=422 if form.is_bound else 200,
    )
