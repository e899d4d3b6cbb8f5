"""The audit log, roles and users in the admin.

The audit log and the roles are read-only. Users are written only through
``reviewconsole.services``, which owns every rule about who may change whom; the forms below call
its checks to show errors beside the fields, and the services check again when they write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.forms import AdminPasswordChangeForm
from django.contrib.admin.utils import unquote
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.contrib.auth.views import PasswordChangeView
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy
from django_tasks_db.admin import DBTaskResultAdmin
from django_tasks_db.models import DBTaskResult

from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.identity import acting_user
from reviewconsole.models import (
    AccountOrigin,
    ChainHead,
    ChangeRequest,
    Event,
    ReviewClaim,
    ReviewComment,
    ReviewThread,
    SignOnIdentity,
    Tenant,
    TenantMembership,
    WorkerHeartbeat,
)
from reviewconsole.roles import role_name
from reviewconsole.scopes import validate_scope_value
from reviewconsole.services import (
    PROFILE_FIELDS,
    SET_BY_OWNER_ONLY,
    assignable_roles,
    password_strength_check,
    tenant_create,
    user_active_check,
    user_create,
    user_password_change,
    user_role,
    user_role_check,
    user_tenants_check,
    user_update,
    users_manageable_by,
)
from reviewconsole.tenancy import is_deployment_wide, visible


@admin.register(Event)
class EventAdmin(admin.ModelAdmin[Event]):
    list_display = ("created_at", "actor_name", "action", "target", "reason")
    list_filter = ("action", "created_at")
    search_fields = ("actor_name", "target", "reason")
    date_hierarchy = "created_at"
    readonly_fields = ("created_at", "actor", "actor_name", "action", "target", "reason", "details")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Event | None = None) -> bool:
        # Events span every tenant: only deployment-wide users read them.
        return is_deployment_wide(request.user) and super().has_view_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Event | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Event | None = None) -> bool:
        return False


@admin.register(ChainHead)
class ChainHeadAdmin(admin.ModelAdmin[ChainHead]):
    """The audit chain's signed heads: read-only, for the same readers as the audit log."""

    list_display = ("id", "count", "event_id", "hash")
    readonly_fields = ("count", "event_id", "hash", "signature")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: ChainHead | None = None) -> bool:
        return is_deployment_wide(request.user) and super().has_view_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: ChainHead | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ChainHead | None = None) -> bool:
        return False


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin[WorkerHeartbeat]):
    """Which workers are alive: each worker's loop writes its row; read-only here."""

    list_display = ("worker_id", "started_at", "last_seen")
    readonly_fields = ("worker_id", "started_at", "last_seen")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: WorkerHeartbeat | None = None) -> bool:
        return is_deployment_wide(request.user) and super().has_view_permission(request, obj)

    def has_change_permission(
        self, request: HttpRequest, obj: WorkerHeartbeat | None = None
    ) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: WorkerHeartbeat | None = None
    ) -> bool:
        return False


@admin.register(ReviewClaim)
class ReviewClaimAdmin(admin.ModelAdmin[ReviewClaim]):
    """Reviewers' claims, read-only: they are taken, released and broken on the item pages
    (``reviewconsole.claims``, each write audited)."""

    list_display = ("item_id", "tenant", "holder", "claimed_at", "expires_at")
    readonly_fields = ("tenant", "item_id", "kind", "title", "holder", "claimed_at", "expires_at")

    def get_queryset(self, request: HttpRequest) -> QuerySet[ReviewClaim]:
        return visible(super().get_queryset(request), request.user)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ReviewClaim | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: ReviewClaim | None = None) -> bool:
        return False


@admin.register(AccountOrigin)
class AccountOriginAdmin(admin.ModelAdmin[AccountOrigin]):
    """Who created each account and whose it is for four eyes (``reviewconsole.accounts``):
    written when the account is made, read-only here; the user list shows it too."""

    list_display = ("user", "created_by", "created_at", "password_by_creator", "holder")
    readonly_fields = ("user", "created_by", "created_at", "password_by_creator", "holder")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: AccountOrigin | None = None) -> bool:
        return is_deployment_wide(request.user) and super().has_view_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: AccountOrigin | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AccountOrigin | None = None) -> bool:
        return False


@admin.register(SignOnIdentity)
class SignOnIdentityAdmin(admin.ModelAdmin[SignOnIdentity]):
    """Which provider account each signed-on account belongs to: written at sign-in, read-only."""

    list_display = ("user", "issuer", "subject", "created_at", "last_sign_on_at")
    readonly_fields = ("user", "issuer", "subject", "created_at", "last_sign_on_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: SignOnIdentity | None = None) -> bool:
        return is_deployment_wide(request.user) and super().has_view_permission(request, obj)

    def has_change_permission(
        self, request: HttpRequest, obj: SignOnIdentity | None = None
    ) -> bool:
        return False

    def has_delete_permission(
        self, request: HttpRequest, obj: SignOnIdentity | None = None
    ) -> bool:
        return False


admin.site.unregister(Group)


@admin.register(Group)
class RoleAdmin(GroupAdmin):
    """Roles are defined in code and created by migrations; the admin only shows them."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Group | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Group | None = None) -> bool:
        return False


def _checked(form: forms.BaseForm, check: Callable[[], object]) -> None:
    """Run a service check; its refusal becomes an error on the field it names."""
    try:
        check()
    except ValidationFailure as failure:
        field = failure.field if failure.field in form.fields else None
        form.add_error(field, failure.message)
    except PermissionRefused as refusal:
        form.add_error(None, refusal.message)


class ConsoleUserCreationForm(forms.ModelForm[User]):
    """A new user: a name, one role, and optionally a first password (the user may change it)."""

    actor: User
    role = forms.ChoiceField(choices=())
    password1 = forms.CharField(
        label="Password",
        required=False,
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text="Leave empty for an account that cannot log in until a password is set.",
    )
    password2 = forms.CharField(
        label="Password confirmation",
        required=False,
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    class Meta:
        model = User
        fields = ("username",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        role = self.fields["role"]
        assert isinstance(role, forms.ChoiceField)
        role.choices = [(r, role_name(r)) for r in assignable_roles(self.actor)]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if "role" in data:
            _checked(self, lambda: user_role_check(actor=self.actor, user=None, role=data["role"]))
        password = data.get("password1") or ""
        if password != (data.get("password2") or ""):
            self.add_error("password2", "The two password fields do not match.")
        elif password:
            probe = User(username=data.get("username", ""))
            _checked(self, lambda: password_strength_check(password=password, user=probe))
        return data


class ConsoleUserChangeForm(forms.ModelForm[User]):
    """One role instead of free groups and flags; staff status follows the role."""

    actor: User
    role = forms.ChoiceField(choices=())

    class Meta:
        model = User
        fields = (*PROFILE_FIELDS, "is_active")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        current = user_role(self.instance)
        choices = assignable_roles(self.actor)
        if current is not None and current not in choices:
            choices = [current, *choices]
        role = self.fields.get("role")  # absent on one's own account, where it is read-only
        if isinstance(role, forms.ChoiceField):
            role.choices = [(r, role_name(r)) for r in choices]
            role.initial = current

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        original = User.objects.get(pk=self.instance.pk)
        if "role" in data:
            _checked(
                self, lambda: user_role_check(actor=self.actor, user=original, role=data["role"])
            )
        if "is_active" in data:
            _checked(
                self,
                lambda: user_active_check(
                    actor=self.actor, user=original, is_active=data["is_active"]
                ),
            )
        return data


def _formset_tenants(formset: Any) -> list[str]:
    tenants = []
    for form in formset.forms:
        data = getattr(form, "cleaned_data", None) or {}
        if formset.can_delete and formset._should_delete_form(form):
            continue
        if data.get("tenant"):
            tenants.append(str(data["tenant"]))
    return tenants


class TenantMembershipFormSet(BaseInlineFormSet[TenantMembership, User, Any]):
    actor: User

    def clean(self) -> None:
        super().clean()
        user = self.instance if self.instance.pk else None
        try:
            user_tenants_check(actor=self.actor, user=user, tenants=_formset_tenants(self))
        except ValidationFailure as failure:
            raise forms.ValidationError(failure.message) from None


class TenantMembershipInline(admin.TabularInline[TenantMembership, User]):
    """The tenants a user is limited to; none means deployment-wide. Editable with the user, by
    whoever may change that user, except on one's own account."""

    model = TenantMembership
    formset = TenantMembershipFormSet
    extra = 0
    fields = ("tenant",)

    def get_formset(self, request: HttpRequest, obj: User | None = None, **kwargs: Any) -> Any:
        formset = super().get_formset(request, obj, **kwargs)
        return type(formset.__name__, (formset,), {"actor": request.user})

    def _user_admin(self) -> admin.ModelAdmin[User]:
        return self.admin_site._registry[User]

    def _editable(self, request: HttpRequest, obj: Any) -> bool:
        if obj is None:
            return self._user_admin().has_add_permission(request)
        return obj.pk != request.user.pk and self._user_admin().has_change_permission(request, obj)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._user_admin().has_view_permission(request, obj)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._editable(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._editable(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._editable(request, obj)


class ConsoleUserAdmin(UserAdmin[User]):
    """Users, written through the user services.

    No one edits ``is_superuser`` or direct permissions here (superusers are made on the shell
    with ``createsuperuser``); staff status follows the role; users are deactivated, never
    deleted, so their audit trail keeps its actor; another user's password is never set here.
    """

    form = ConsoleUserChangeForm
    add_form = ConsoleUserCreationForm
    inlines = (TenantMembershipInline,)
    fieldsets = (
        (None, {"fields": ("username",)}),
        (_("Personal info"), {"fields": PROFILE_FIELDS}),
        (_("Access"), {"fields": ("role", "is_active", "is_staff", "is_superuser")}),
        (_("Important dates"), {"fields": ("last_login", "date_joined", "created_by")}),
    )
    add_fieldsets = (
        (None, {"classes": ("wide",), "fields": ("username", "role", "password1", "password2")}),
    )
    list_display = (
        "username",
        "email",
        "role",
        "is_active",
        "is_staff",
        "is_superuser",
        "created_by",
    )
    filter_horizontal = ()

    @admin.display(description=pgettext_lazy("admin", "role"))
    def role(self, obj: User) -> str:
        role = user_role(obj)
        return role_name(role) if role else "—"

    @admin.display(description=pgettext_lazy("admin", "created by"))
    def created_by(self, obj: User) -> str:
        """Who made the account; with its password, the account is theirs for four eyes."""
        try:
            origin = obj.origin
        except AccountOrigin.DoesNotExist:
            return "the shell"
        creator = origin.created_by.get_username() if origin.created_by else "a deleted account"
        return f"{creator} (with its password)" if origin.password_by_creator else creator

    def get_readonly_fields(self, request: HttpRequest, obj: User | None = None) -> list[str]:
        if obj is None:
            return []
        fields = ["username", "is_staff", "is_superuser", "last_login", "date_joined", "created_by"]
        if obj.pk == request.user.pk:
            # One's own role and activity are someone else's decision.
            fields += ["role", "is_active"]
        return fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[User]:
        manageable = users_manageable_by(acting_user(request)).values("pk")
        return (
            super()
            .get_queryset(request)
            .filter(pk__in=manageable)
            .select_related("origin__created_by")
            .prefetch_related("groups")
        )

    def _reachable(self, request: HttpRequest, obj: User | None) -> bool:
        return obj is None or self.get_queryset(request).filter(pk=obj.pk).exists()

    def has_view_permission(self, request: HttpRequest, obj: User | None = None) -> bool:
        return super().has_view_permission(request, obj) and self._reachable(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: User | None = None) -> bool:
        return super().has_change_permission(request, obj) and self._reachable(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: User | None = None) -> bool:
        return False

    def get_form(
        self, request: HttpRequest, obj: User | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        return type(form.__name__, (form,), {"actor": request.user})

    def changeform_view(
        self,
        request: HttpRequest,
        object_id: str | None = None,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except (ValidationFailure, PermissionRefused) as refusal:
            # The forms check first; this is a race, and the transaction has rolled back.
            raise PermissionDenied(str(refusal)) from refusal

    def save_model(self, request: HttpRequest, obj: User, form: Any, change: bool) -> None:
        """The user, its role and its memberships are written together in ``save_related``."""

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        actor = acting_user(request)
        data = form.cleaned_data
        memberships = [f for f in formsets if f.model is TenantMembership]
        tenants = _formset_tenants(memberships[0]) if memberships else None
        if change:
            user = user_update(
                actor=actor,
                user=form.instance,
                role=data.get("role"),
                is_active=data.get("is_active"),
                tenants=tenants,
                profile={name: data[name] for name in PROFILE_FIELDS if name in data},
            )
        else:
            user = user_create(
                actor=actor,
                username=data["username"],
                role=data["role"],
                tenants=tenants or [],
                password=data.get("password1") or None,
            )
        form.instance.pk = user.pk
        form.instance.refresh_from_db()
        form.instance._state.adding = False
        for formset in formsets:
            # Django's own change message reads these; the audit event above is the record.
            formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []

    def user_change_password(
        self, request: HttpRequest, id: str, form_url: str = ""
    ) -> HttpResponse:
        """One's own password is changed where the old one is asked for; no one else's here."""
        if unquote(id) == str(request.user.pk):
            return HttpResponseRedirect(reverse("admin:password_change"))
        raise PermissionDenied(f"password {SET_BY_OWNER_ONLY}")


class TenantAddForm(forms.ModelForm[Tenant]):
    class Meta:
        model = Tenant
        fields = ("name",)

    def clean_name(self) -> str:
        try:
            return validate_scope_value(self.cleaned_data["name"], field="name")
        except ValidationFailure as failure:
            raise forms.ValidationError(failure.message) from None


@admin.register(Tenant)
class TenantAdmin(admin.ModelAdmin[Tenant]):
    """The tenant registry. Deployment-wide admins add tenants (through ``tenant_create``, so
    each is audited); no one changes or deletes one, since memories and the audit log keep
    naming it. A tenant-limited admin sees only its own tenants."""

    list_display = ("name", "created_at", "created_by")
    search_fields = ("name",)
    form = TenantAddForm

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tenant]:
        return visible(super().get_queryset(request), request.user, field="name")

    def get_readonly_fields(self, request: HttpRequest, obj: Tenant | None = None) -> Any:
        return ("name", "created_at", "created_by") if obj is not None else ()

    def get_fields(self, request: HttpRequest, obj: Tenant | None = None) -> Any:
        return ("name", "created_at", "created_by") if obj is not None else ("name",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return is_deployment_wide(request.user) and super().has_add_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Tenant | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Tenant | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Tenant, form: Any, change: bool) -> None:
        try:
            stored, _created = tenant_create(name=obj.name, actor=acting_user(request))
        except (ValidationFailure, PermissionRefused) as refusal:
            raise PermissionDenied(refusal.message) from None
        obj.pk, obj.created_at, obj.created_by = stored.pk, stored.created_at, stored.created_by


class TaskResultAdmin(DBTaskResultAdmin):
    """Background task results name every tenant's items in their arguments, return values and
    tracebacks: only deployment-wide admins read them."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_deployment_wide(request.user) and super().has_module_permission(request)

    def has_view_permission(
        self, request: HttpRequest, obj: DBTaskResult[Any, Any] | None = None
    ) -> bool:
        return is_deployment_wide(request.user) and super().has_view_permission(request, obj)


admin.site.unregister(DBTaskResult)
admin.site.register(DBTaskResult, TaskResultAdmin)


admin.site.unregister(User)
admin.site.register(User, ConsoleUserAdmin)


class OwnPasswordChangeForm(AdminPasswordChangeForm):
    """The admin's own-password form (it asks for the old password), saved through the service."""

    def save(self, commit: bool = True) -> User:
        self.user = user_password_change(
            actor=self.user, user=self.user, password=self.cleaned_data["new_password1"]
        )
        return self.user


def own_password_change(request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
    """The admin site's "change password" page, audited."""
    site = admin.site
    request.current_app = site.name
    return PasswordChangeView.as_view(
        form_class=OwnPasswordChangeForm,
        success_url=reverse("admin:password_change_done", current_app=site.name),
        extra_context={**site.each_context(request), **(extra_context or {})},
    )(request)


# The site builds its URLs from this attribute when the URLconf loads, after this module.
admin.site.password_change = own_password_change  # type: ignore[method-assign]


# --- Review conversations and change requests: written by reviewconsole/conversations.py only;
# read-only here, and only for deployment-wide users (they name every tenant's items).


class _ConversationAdmin(admin.ModelAdmin[Any]):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_deployment_wide(request.user) and super().has_view_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(ChangeRequest)
class ChangeRequestAdmin(_ConversationAdmin):
    list_display = ("item_id", "tenant", "requested_by", "requested_at", "resubmitted_as")
    readonly_fields = (
        "tenant",
        "item_id",
        "note",
        "requested_by",
        "requested_at",
        "returned_to",
        "resubmitted_as",
        "resubmitted_by",
        "resubmitted_at",
    )


@admin.register(ReviewThread)
class ReviewThreadAdmin(_ConversationAdmin):
    list_display = ("item_id", "anchor", "status", "opened_by", "opened_at")
    readonly_fields = (
        "tenant",
        "item_id",
        "anchor",
        "status",
        "opened_by",
        "opened_at",
        "change_request",
        "resolved_by",
        "resolved_at",
    )


@admin.register(ReviewComment)
class ReviewCommentAdmin(_ConversationAdmin):
    list_display = ("thread", "author", "written_at")
    readonly_fields = ("thread", "author", "body", "written_at")
