"""The forms of the console's user pages: what an admin fills in to create or change a user.

They offer only what the admin may give (the roles at or below their rank, the tenants they may
use); the services (``reviewconsole.services``) check every value again before writing."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth.models import User
from django.utils.translation import gettext_lazy as _

from reviewconsole.errors import ValidationFailure
from reviewconsole.models import Tenant
from reviewconsole.services import assignable_roles
from reviewconsole.tenancy import tenants_of

ROLE_LABELS = {
    "reviewer": _("reviewer"),
    "operator": _("operator"),
    "admin": _("admin"),
    "agent": _("agent"),
}


def _tenant_choices(actor: User) -> list[tuple[str, str]]:
    allowed = tenants_of(actor)
    names = Tenant.objects.order_by("name").values_list("name", flat=True)
    return [(name, name) for name in names if allowed is None or name in allowed]


class UserChangeForm(forms.Form):
    """The parts of a user an admin changes: role, tenant memberships, whether it may log in."""

    role = forms.ChoiceField(label=_("Role"))
    tenants = forms.MultipleChoiceField(
        label=_("Tenants"),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text=_("None: the user works across every tenant of the deployment"),
    )
    is_active = forms.BooleanField(
        label=_("Active"),
        required=False,
        help_text=_("An inactive user cannot log in and holds no permission; nothing is deleted"),
    )

    def __init__(self, *args: Any, actor: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        role_field = self.fields["role"]
        assert isinstance(role_field, forms.ChoiceField)
        role_field.choices = [(role, ROLE_LABELS[role]) for role in assignable_roles(actor)]
        tenants_field = self.fields["tenants"]
        assert isinstance(tenants_field, forms.MultipleChoiceField)
        tenants_field.choices = _tenant_choices(actor)

    def add_failure(self, failure: ValidationFailure) -> None:
        """A service's refusal as an error on the field it names."""
        field = failure.field if failure.field in self.fields else None
        self.add_error(field, failure.message)


class UserCreateForm(UserChangeForm):
    username = forms.CharField(label=_("Username"), max_length=150)
    email = forms.EmailField(label=_("Email"), required=False)
    password = forms.CharField(
        label=_("Initial password"),
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False),
        help_text=_(
            "Empty: the user cannot log in until a password is set on the shell "
            "(manage.py changepassword). A password you set makes the account yours for four eyes."
        ),
    )

    field_order = ["username", "email", "role", "tenants", "password"]

    def __init__(self, *args: Any, actor: User, **kwargs: Any) -> None:
        super().__init__(*args, actor=actor, **kwargs)
        # A new user is active; deactivating is a change.
        del self.fields["is_active"]
