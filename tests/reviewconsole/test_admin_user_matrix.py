"""Who may do what on the Django admin's user pages, for every role.

Every write is POSTed directly, with the forbidden values a crafted request would carry, so the
refusals are the server's and not the form's layout. A refused request writes nothing: neither the
change nor an audit event. An allowed one writes both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from reviewconsole.models import Event, TenantMembership
from reviewconsole.roles import Role
from reviewconsole.services import user_role, user_set_role
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

NEW_PASSWORD = "a-different-horse-staple-42"
PREFIX = "tenant_memberships"
ACTORS = ("anonymous", "reviewer", "operator", "agent", "admin", "limited_admin", "superuser")
MANAGERS = frozenset({"admin", "limited_admin", "superuser"})
WIDE_MANAGERS = frozenset({"admin", "superuser"})
STAFF = frozenset({"reviewer", "operator", "admin", "limited_admin", "superuser"})


@dataclass
class World:
    users: dict[str, User]
    tea_reviewer: User  # limited to teahouse: within the limited admin's tenants
    coffee_reviewer: User  # limited to coffeehouse: outside them
    tea_agent: User
    wide_reviewer: User  # deployment-wide
    roles_before: dict[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.roles_before = {user.username: user_role(user) for user in User.objects.all()}

    def actor(self, name: str) -> User | None:
        return self.users.get(name)

    def client(self, name: str) -> Client:
        client = Client()
        actor = self.actor(name)
        if actor is not None:
            client.force_login(actor)
        return client


@pytest.fixture
def world(db: None) -> World:
    def make(name: str, role: str, tenants: list[str] | None = None) -> User:
        return user_set_role(username=name, role=role, password=PASSWORD, tenants=tenants)

    superuser = User.objects.create_superuser("root", "root@example.com", PASSWORD)
    return World(
        users={
            "reviewer": make("rita", Role.REVIEWER),
            "operator": make("olivia", Role.OPERATOR),
            "agent": make("agent-7", Role.AGENT),
            "admin": make("ada", Role.ADMIN),
            "limited_admin": make("lena", Role.ADMIN, ["teahouse", "milkbar"]),
            "superuser": superuser,
        },
        tea_reviewer=make("tea-rev", Role.REVIEWER, ["teahouse"]),
        coffee_reviewer=make("coffee-rev", Role.REVIEWER, ["coffeehouse"]),
        tea_agent=make("tea-bot", Role.AGENT, ["teahouse"]),
        wide_reviewer=make("wide-rev", Role.REVIEWER),
    )


def _tenants(user: User) -> set[str]:
    return set(TenantMembership.objects.filter(user=user).values_list("tenant", flat=True))


def change_form(
    user: User, *, add: tuple[str, ...] = (), delete: tuple[str, ...] = (), **changes: Any
) -> dict[str, Any]:
    """The change form of ``user`` as the page would post it, with ``changes`` applied
    (a value of None leaves the field out, as an unticked checkbox is left out)."""
    memberships = list(TenantMembership.objects.filter(user=user).order_by("pk"))
    joined = timezone.localtime(user.date_joined)
    data: dict[str, Any] = {
        # Fields the stock user form also had; the console's form shows them read-only.
        "username": user.username,
        "date_joined_0": joined.date().isoformat(),
        "date_joined_1": joined.time().strftime("%H:%M:%S"),
        "groups": [str(pk) for pk in user.groups.values_list("pk", flat=True)],
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "role": user_role(user) or "",
        "is_active": "on" if user.is_active else None,
    }
    data.update(_inline(memberships, user.pk, add=add, delete=delete))
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


def add_form(
    username: str, role: str, tenants: tuple[str, ...] = (), **extra: Any
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "username": username,
        "role": role,
        "password1": NEW_PASSWORD,
        "password2": NEW_PASSWORD,
    }
    data.update(_inline([], None, add=tenants, delete=()))
    data.update(extra)
    return data


def _inline(
    memberships: list[TenantMembership],
    user_pk: int | None,
    *,
    add: tuple[str, ...],
    delete: tuple[str, ...],
) -> dict[str, Any]:
    data: dict[str, Any] = {
        f"{PREFIX}-TOTAL_FORMS": len(memberships) + len(add),
        f"{PREFIX}-INITIAL_FORMS": len(memberships),
        f"{PREFIX}-MIN_NUM_FORMS": 0,
        f"{PREFIX}-MAX_NUM_FORMS": 1000,
    }
    for index, membership in enumerate(memberships):
        data[f"{PREFIX}-{index}-id"] = membership.pk
        data[f"{PREFIX}-{index}-user"] = user_pk
        data[f"{PREFIX}-{index}-tenant"] = membership.tenant
        if membership.tenant in delete:
            data[f"{PREFIX}-{index}-DELETE"] = "on"
    for index, tenant in enumerate(add, start=len(memberships)):
        data[f"{PREFIX}-{index}-tenant"] = tenant
        if user_pk is not None:
            data[f"{PREFIX}-{index}-user"] = user_pk
    return data


def change_url(user: User) -> str:
    return reverse("admin:auth_user_change", args=[user.pk])


# --- Pages (GET) ---------------------------------------------------------------------------------

LOGIN = 302  # anonymous users and agents are sent to the admin's login page


def _status(**by_actor: int) -> dict[str, int]:
    return {"anonymous": LOGIN, "agent": LOGIN, "reviewer": 403, "operator": 403, **by_actor}


PAGES: dict[str, tuple[Callable[[World], str], dict[str, int]]] = {
    "changelist": (
        lambda w: reverse("admin:auth_user_changelist"),
        _status(admin=200, limited_admin=200, superuser=200),
    ),
    "add": (
        lambda w: reverse("admin:auth_user_add"),
        _status(admin=200, limited_admin=200, superuser=200),
    ),
    "change_in_tenant": (
        lambda w: change_url(w.tea_reviewer),
        _status(admin=200, limited_admin=200, superuser=200),
    ),
    # For a tenant-limited admin a user of another tenant does not exist (back to the index).
    "change_other_tenant": (
        lambda w: change_url(w.coffee_reviewer),
        _status(admin=200, limited_admin=302, superuser=200),
    ),
    "change_deployment_wide": (
        lambda w: change_url(w.wide_reviewer),
        _status(admin=200, limited_admin=302, superuser=200),
    ),
    # Users are deactivated, never deleted: their audit trail keeps its actor.
    "delete": (
        lambda w: reverse("admin:auth_user_delete", args=[w.tea_reviewer.pk]),
        _status(admin=403, limited_admin=403, superuser=403),
    ),
    "password_of_other": (
        lambda w: reverse("admin:auth_user_password_change", args=[w.tea_reviewer.pk]),
        _status(admin=403, limited_admin=403, superuser=403),
    ),
    "own_password": (
        lambda w: reverse("admin:password_change"),
        _status(reviewer=200, operator=200, admin=200, limited_admin=200, superuser=200),
    ),
}


@pytest.mark.parametrize("actor", ACTORS)
@pytest.mark.parametrize("page", sorted(PAGES))
def test_user_pages_answer_each_role(world: World, page: str, actor: str) -> None:
    url, expected = PAGES[page]
    assert world.client(actor).get(url(world)).status_code == expected[actor]


def test_a_tenant_limited_admin_lists_only_users_of_its_tenants(world: World) -> None:
    response = world.client("limited_admin").get(reverse("admin:auth_user_changelist"))
    listed = {user.username for user in response.context["cl"].result_list}
    assert listed == {"lena", "tea-rev", "tea-bot"}


def test_an_admin_lists_every_user_but_superusers(world: World) -> None:
    response = world.client("admin").get(reverse("admin:auth_user_changelist"))
    listed = {user.username for user in response.context["cl"].result_list}
    assert "root" not in listed
    assert {"ada", "lena", "rita", "tea-rev", "coffee-rev", "wide-rev", "agent-7"} <= listed


def test_ones_own_password_link_leads_to_the_page_that_asks_for_the_old_one(world: World) -> None:
    ada = world.users["admin"]
    response = world.client("admin").get(reverse("admin:auth_user_password_change", args=[ada.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:password_change")


# --- Writes (POST) -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    post: Callable[[World, Client, User | None], Any]
    happened: Callable[[World, User | None], bool]
    allowed: frozenset[str]
    # False where a manager's request is otherwise fine: the user is made, the flag dropped.
    nothing_written_when_refused: bool = True


def _post_change(target: Callable[[World, User | None], User], **form: Any) -> Any:
    def post(world: World, client: Client, actor: User | None) -> Any:
        user = target(world, actor)
        data = change_form(user, **form)
        return client.post(change_url(user), data)

    return post


def _self(world: World, actor: User | None) -> User:
    # Anonymous has no own account; aim at someone else's so the refusal is still exercised.
    return actor if actor is not None else world.tea_reviewer


def _another_role(user: User) -> str:
    return Role.OPERATOR if user_role(user) == Role.REVIEWER else Role.REVIEWER


def _fresh(user: User) -> User:
    return User.objects.get(pk=user.pk)


def _own_password(world: World, client: Client, actor: User | None) -> Any:
    return client.post(
        reverse("admin:password_change"),
        {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
    )


def _others_password(world: World, client: Client, actor: User | None) -> Any:
    return client.post(
        reverse("admin:auth_user_password_change", args=[world.tea_reviewer.pk]),
        {"password1": NEW_PASSWORD, "password2": NEW_PASSWORD, "usable_password": "true"},
    )


def _add(username: str, role: str, tenants: tuple[str, ...], **extra: Any) -> Any:
    def post(world: World, client: Client, actor: User | None) -> Any:
        return client.post(
            reverse("admin:auth_user_add"), add_form(username, role, tenants, **extra)
        )

    return post


def _created(username: str) -> Callable[[World, User | None], bool]:
    return lambda w, a: User.objects.filter(username=username).exists()


WRITES: dict[str, Write] = {
    "grant_superuser_to_other": Write(
        _post_change(lambda w, a: w.tea_reviewer, is_superuser="on", is_staff="on"),
        lambda w, a: _fresh(w.tea_reviewer).is_superuser,
        frozenset(),
    ),
    "grant_superuser_to_self": Write(
        _post_change(_self, is_superuser="on"),
        lambda w, a: _fresh(_self(w, a)).is_superuser and a is not w.users["superuser"],
        frozenset(),
    ),
    "grant_direct_permissions": Write(
        _post_change(lambda w, a: w.tea_reviewer, user_permissions=["1", "2", "3"]),
        lambda w, a: _fresh(w.tea_reviewer).user_permissions.exists(),
        frozenset(),
    ),
    # Staff status follows the role: an agent never gets the admin by a ticked checkbox.
    "staff_flag_on_an_agent": Write(
        _post_change(lambda w, a: w.tea_agent, is_staff="on"),
        lambda w, a: _fresh(w.tea_agent).is_staff,
        frozenset(),
    ),
    "role_of_other": Write(
        _post_change(lambda w, a: w.tea_reviewer, role=Role.OPERATOR),
        lambda w, a: user_role(_fresh(w.tea_reviewer)) == Role.OPERATOR,
        MANAGERS,
    ),
    "role_admin_for_other": Write(
        _post_change(lambda w, a: w.tea_reviewer, role=Role.ADMIN),
        lambda w, a: user_role(_fresh(w.tea_reviewer)) == Role.ADMIN,
        MANAGERS,
    ),
    "role_by_groups_field": Write(
        _post_change(lambda w, a: w.tea_reviewer, groups=["1", "2", "3", "4"]),
        lambda w, a: _fresh(w.tea_reviewer).groups.count() != 1,
        frozenset(),
    ),
    "role_of_other_tenants_user": Write(
        _post_change(lambda w, a: w.coffee_reviewer, role=Role.OPERATOR),
        lambda w, a: user_role(_fresh(w.coffee_reviewer)) == Role.OPERATOR,
        WIDE_MANAGERS,
    ),
    "own_role": Write(
        lambda w, c, a: c.post(
            change_url(_self(w, a)), change_form(_self(w, a), role=_another_role(_self(w, a)))
        ),
        lambda w, a: user_role(_fresh(_self(w, a))) != w.roles_before[_self(w, a).username],
        frozenset(),
    ),
    "deactivate_other": Write(
        _post_change(lambda w, a: w.tea_reviewer, is_active=None),
        lambda w, a: not _fresh(w.tea_reviewer).is_active,
        MANAGERS,
    ),
    "deactivate_self": Write(
        _post_change(_self, is_active=None),
        lambda w, a: not _fresh(_self(w, a)).is_active,
        frozenset(),
    ),
    "membership_add_within_own_tenants": Write(
        _post_change(lambda w, a: w.tea_reviewer, add=("milkbar",)),
        lambda w, a: _tenants(w.tea_reviewer) == {"teahouse", "milkbar"},
        MANAGERS,
    ),
    "membership_add_outside_own_tenants": Write(
        _post_change(lambda w, a: w.tea_reviewer, add=("coffeehouse",)),
        lambda w, a: "coffeehouse" in _tenants(w.tea_reviewer),
        WIDE_MANAGERS,
    ),
    # Removing the last membership makes a user deployment-wide.
    "membership_remove_last": Write(
        _post_change(lambda w, a: w.tea_reviewer, delete=("teahouse",)),
        lambda w, a: _tenants(w.tea_reviewer) == set(),
        WIDE_MANAGERS,
    ),
    "limited_admins_membership_remove": Write(
        _post_change(lambda w, a: w.users["limited_admin"], delete=("milkbar",)),
        lambda w, a: _tenants(w.users["limited_admin"]) == {"teahouse"},
        WIDE_MANAGERS,  # lena may not edit her own memberships
    ),
    "own_membership_add": Write(
        _post_change(_self, add=("coffeehouse",)),
        lambda w, a: "coffeehouse" in _tenants(_self(w, a)),
        frozenset(),
    ),
    "add_user_in_own_tenant": Write(
        _add("newbie", Role.REVIEWER, ("teahouse",)),
        _created("newbie"),
        MANAGERS,
    ),
    "add_deployment_wide_user": Write(
        _add("newbie", Role.REVIEWER, ()),
        _created("newbie"),
        WIDE_MANAGERS,
    ),
    "add_user_in_other_tenant": Write(
        _add("newbie", Role.REVIEWER, ("coffeehouse",)),
        _created("newbie"),
        WIDE_MANAGERS,
    ),
    "add_superuser": Write(
        _add("newbie", Role.ADMIN, ("teahouse",), is_superuser="on", is_staff="on"),
        lambda w, a: User.objects.filter(username="newbie", is_superuser=True).exists(),
        frozenset(),
        nothing_written_when_refused=False,
    ),
    "add_agent_with_staff_flag": Write(
        _add("newbie", Role.AGENT, ("teahouse",), is_staff="on"),
        lambda w, a: User.objects.filter(username="newbie", is_staff=True).exists(),
        frozenset(),
        nothing_written_when_refused=False,
    ),
    "delete_other": Write(
        lambda w, c, a: c.post(
            reverse("admin:auth_user_delete", args=[w.tea_reviewer.pk]), {"post": "yes"}
        ),
        lambda w, a: not User.objects.filter(pk=w.tea_reviewer.pk).exists(),
        frozenset(),
    ),
    "password_of_other": Write(
        _others_password,
        lambda w, a: _fresh(w.tea_reviewer).check_password(NEW_PASSWORD),
        frozenset(),
    ),
    "own_password": Write(
        _own_password,
        lambda w, a: a is not None and _fresh(a).check_password(NEW_PASSWORD),
        frozenset(STAFF),
    ),
}


@pytest.mark.parametrize("actor", ACTORS)
@pytest.mark.parametrize("write", sorted(WRITES))
def test_user_writes_are_allowed_or_refused_per_role(world: World, write: str, actor: str) -> None:
    spec = WRITES[write]
    user = world.actor(actor)
    events = Event.objects.count()

    response = spec.post(world, world.client(actor), user)

    allowed = actor in spec.allowed
    assert spec.happened(world, user) == allowed, response
    if allowed:
        assert response.status_code == 302
        assert Event.objects.count() > events
    elif spec.nothing_written_when_refused:
        assert Event.objects.count() == events


def test_a_refused_form_names_the_field(world: World) -> None:
    lena = world.users["limited_admin"]
    client = world.client("limited_admin")

    response = client.post(
        change_url(world.tea_reviewer), change_form(world.tea_reviewer, add=("coffeehouse",))
    )
    assert response.status_code == 200
    assert "coffeehouse" in str(
        response.context["inline_admin_formsets"][0].formset.non_form_errors()
    )

    response = client.post(reverse("admin:auth_user_add"), add_form("newbie", Role.REVIEWER))
    assert response.status_code == 200
    assert "at least one of your tenants" in str(
        response.context["inline_admin_formsets"][0].formset.non_form_errors()
    )
    assert _tenants(lena) == {"teahouse", "milkbar"}
