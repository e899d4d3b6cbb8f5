"""Login throttling through the production recipe's balancer (issue 37, item 6): HAProxy passes
every request to an instance from its own address, so the instances count failures against the
address HAProxy appends to ``X-Forwarded-For`` (``CONSOLE_TRUSTED_PROXIES``), never against the
balancer's, and never against an address the client wrote.

Clients connect from distinct loopback addresses (127.0.0.x), so HAProxy sees distinct clients.
The deployment is conftest.py's; each test signs in as a reviewer account of its own, so no other
test's sign-ins are counted with these.
"""

from __future__ import annotations

import http.client
import re
import secrets
import urllib.parse

from scripts.cluster import Cluster
from tests.scaleout.conftest import GROUP, Deployment

pytestmark = GROUP

CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
LIMIT = 5  # AXES_FAILURE_LIMIT


class Browser:
    """A browser at loopback address ``source``: its own connections to HAProxy (or to ``port``)
    and its cookies (sent over plain HTTP though the production settings mark them Secure: the
    recipe serves HTTP on the loopback)."""

    def __init__(self, cluster: Cluster, source: str, port: int | None = None) -> None:
        self.source, self.port = source, port or cluster.recipe.port
        self.cookies: dict[str, str] = {}

    def request(
        self,
        method: str,
        path: str,
        *,
        form: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        conn = http.client.HTTPConnection(
            "127.0.0.1", self.port, timeout=60, source_address=(self.source, 0)
        )
        sent = {"Host": "127.0.0.1", **(headers or {})}
        body = None
        if form is not None:
            body = urllib.parse.urlencode(form)
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            text = response.read().decode()
            for name, value in response.getheaders():
                if name.lower() == "set-cookie":
                    key, _, rest = value.partition("=")
                    self.cookies[key.strip()] = rest.split(";", 1)[0]
            return response.status, text
        finally:
            conn.close()

    def login(self, username: str, password: str, forwarded_for: str | None = None) -> int:
        """The status of signing in through the login form: 302 signed in, 200 refused, 429
        locked out. ``forwarded_for``: an X-Forwarded-For header the client writes itself."""
        headers = {} if forwarded_for is None else {"X-Forwarded-For": forwarded_for}
        status, page = self.request("GET", "/accounts/login/", headers=headers)
        token = CSRF.search(page)
        assert status == 200 and token is not None, status
        form = {"username": username, "password": password, "csrfmiddlewaretoken": token[1]}
        status, _ = self.request("POST", "/accounts/login/", form=form, headers=headers)
        return status


def reviewer_account(cluster: Cluster, name: str) -> str:
    """A new reviewer of the demo's tenant with a password, made as an operator does."""
    password = secrets.token_urlsafe(18)
    cluster.manage(
        "add_user", name, "--role", "reviewer", "--tenant", "teahouse", f"--password={password}"
    )
    return password


def test_an_attacker_behind_the_balancer_locks_out_only_themselves(
    deployment: Deployment,
) -> None:
    cluster = deployment.cluster
    password = reviewer_account(cluster, "lockout-reviewer")
    attacker, user = Browser(cluster, "127.0.0.2"), Browser(cluster, "127.0.0.3")

    for _ in range(LIMIT):
        assert attacker.login("lockout-reviewer", "wrong-password") in {200, 429}

    assert attacker.login("lockout-reviewer", password) == 429
    assert user.login("lockout-reviewer", password) == 302
    # The user's sign-in does not lift the attacker's lockout.
    assert Browser(cluster, "127.0.0.2").login("lockout-reviewer", password) == 429


def test_a_forged_forwarded_for_neither_locks_out_the_user_nor_dodges_the_lockout(
    deployment: Deployment,
) -> None:
    cluster = deployment.cluster
    password = reviewer_account(cluster, "forged-reviewer")
    attacker, user = Browser(cluster, "127.0.0.4"), Browser(cluster, "127.0.0.5")

    # Every failure claims another address, the user's among them.
    for n in range(LIMIT):
        forged = f"192.0.2.{n + 1}, 127.0.0.5"
        assert attacker.login("forged-reviewer", "wrong-password", forged) in {200, 429}

    assert attacker.login("forged-reviewer", password, "192.0.2.99") == 429
    assert user.login("forged-reviewer", password) == 302


def test_a_client_that_bypasses_the_balancer_is_counted_by_its_own_address(
    deployment: Deployment,
) -> None:
    """An instance believes X-Forwarded-For only from the balancer's address: a client talking
    to an instance directly is its own address, whatever it writes."""
    cluster = deployment.cluster
    password = reviewer_account(cluster, "direct-reviewer")
    direct = Browser(cluster, "127.0.0.6", port=cluster.recipe.web_ports[0])

    for n in range(LIMIT):
        assert direct.login("direct-reviewer", "wrong-password", f"192.0.2.{n + 1}") in {200, 429}

    assert direct.login("direct-reviewer", password, "192.0.2.50") == 429
    assert Browser(cluster, "127.0.0.7").login("direct-reviewer", password) == 302
