"""Login throttling behind a load balancer (issue 37, item 6): the address a failure is counted
against is the client's, read from the balancer's own ``X-Forwarded-For`` entry and only when
the request came from a trusted proxy; what a client writes in the header is never believed."""

from __future__ import annotations

from typing import Any

import pytest
from axes.helpers import get_client_ip_address
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, RequestFactory
from django.urls import reverse

from reviewconsole.client_address import client_address, proxy_networks
from tests.conftest import PASSWORD

BALANCER = "127.0.0.1"
ATTACKER, USER = "203.0.113.66", "198.51.100.20"


def seen(remote: str, forwarded: str | None = None) -> str | None:
    request = RequestFactory().get("/", REMOTE_ADDR=remote)
    if forwarded is not None:
        request.META["HTTP_X_FORWARDED_FOR"] = forwarded
    return client_address(request)


@pytest.fixture
def behind_balancer(settings: Any) -> None:
    settings.TRUSTED_PROXIES = [BALANCER]


def test_without_trusted_proxies_the_header_is_ignored(settings: Any) -> None:
    settings.TRUSTED_PROXIES = []
    assert seen(BALANCER, ATTACKER) == BALANCER
    assert seen(USER) == USER


@pytest.mark.usefixtures("behind_balancer")
def test_the_balancers_entry_names_the_client() -> None:
    assert seen(BALANCER, ATTACKER) == ATTACKER


@pytest.mark.usefixtures("behind_balancer")
def test_only_the_balancers_own_entry_is_believed() -> None:
    # The balancer appends the address it saw; everything before came from the client.
    assert seen(BALANCER, f"{USER}, {ATTACKER}") == ATTACKER
    assert seen(BALANCER, f"{USER},{ATTACKER}") == ATTACKER


@pytest.mark.usefixtures("behind_balancer")
def test_a_client_not_behind_the_balancer_is_its_own_address() -> None:
    assert seen(ATTACKER, USER) == ATTACKER
    assert seen("127.0.0.2", USER) == "127.0.0.2"


@pytest.mark.usefixtures("behind_balancer")
def test_a_trusted_proxy_without_a_usable_entry_is_the_client() -> None:
    assert seen(BALANCER) == BALANCER
    assert seen(BALANCER, "") == BALANCER
    assert seen(BALANCER, f"{USER}, unknown") == BALANCER


def test_networks_and_ipv6_are_trusted_as_written(settings: Any) -> None:
    settings.TRUSTED_PROXIES = ["10.0.0.0/8", "::1"]
    assert seen("10.1.2.3", ATTACKER) == ATTACKER
    assert seen("::1", "2001:db8::7") == "2001:db8::7"
    assert seen("11.0.0.1", ATTACKER) == "11.0.0.1"


def test_a_malformed_proxy_is_refused_by_name() -> None:
    with pytest.raises(ImproperlyConfigured, match="CONSOLE_TRUSTED_PROXIES: 'balancer'"):
        proxy_networks(["127.0.0.1", "balancer"], name="CONSOLE_TRUSTED_PROXIES")


@pytest.mark.usefixtures("behind_balancer")
def test_axes_counts_the_address_this_module_gives() -> None:
    request = RequestFactory().get("/", REMOTE_ADDR=BALANCER, HTTP_X_FORWARDED_FOR=ATTACKER)
    assert get_client_ip_address(request) == ATTACKER


# Through the login page, as the balancer forwards it.


def login(client: Client, username: str, password: str) -> int:
    return client.post(reverse("login"), {"username": username, "password": password}).status_code


@pytest.mark.django_db
@pytest.mark.usefixtures("behind_balancer")
def test_an_attacker_behind_the_balancer_locks_out_only_themselves(reviewer: User) -> None:
    attacker = Client(REMOTE_ADDR=BALANCER, HTTP_X_FORWARDED_FOR=ATTACKER)
    for _ in range(5):
        assert login(attacker, reviewer.username, "wrong-password") in {200, 429}

    assert login(attacker, reviewer.username, PASSWORD) == 429
    user = Client(REMOTE_ADDR=BALANCER, HTTP_X_FORWARDED_FOR=USER)
    assert login(user, reviewer.username, PASSWORD) == 302


@pytest.mark.django_db
@pytest.mark.usefixtures("behind_balancer")
def test_a_forged_header_neither_locks_out_the_user_nor_dodges_the_lockout(
    reviewer: User,
) -> None:
    # Each attempt claims another address, the user's among them; the balancer appends the
    # attacker's own.
    for n in range(5):
        forged = Client(
            REMOTE_ADDR=BALANCER, HTTP_X_FORWARDED_FOR=f"192.0.2.{n}, {USER}, {ATTACKER}"
        )
        assert login(forged, reviewer.username, "wrong-password") in {200, 429}

    fresh = Client(REMOTE_ADDR=BALANCER, HTTP_X_FORWARDED_FOR=f"192.0.2.99, {ATTACKER}")
    assert login(fresh, reviewer.username, PASSWORD) == 429
    user = Client(REMOTE_ADDR=BALANCER, HTTP_X_FORWARDED_FOR=USER)
    assert login(user, reviewer.username, PASSWORD) == 302
