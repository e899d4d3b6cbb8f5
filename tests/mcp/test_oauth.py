"""OAuth for agents, as the MCP authorization specification describes: the console as the
authorization server (``manage.py runserver``), the MCP endpoint (``manage.py mcp_server
--http``) and the HTTP API as resource servers, all real processes on 127.0.0.1 over one SQLite
file. The MCP Python SDK's ``OAuthClientProvider`` connects through discovery alone (a 401, the
protected resource metadata, the authorization server's metadata, registration, consent, the
token), the consent given by a logged-in agent account's browser session (an HTTP client with
its cookies and CSRF token, as a browser submits the form).

Two deployments: one with dynamic client registration switched on, one with it off and a
client registered beforehand (``manage.py createapplication``)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Generator, Iterator
from contextlib import ExitStack, closing
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from tests.helpers import ROOT, copy_database, manage_many_on_sqlite
from tests.mcp.http_deployment import SEARCH, _free_port, _world, http_status
from tests.mcp.test_server import refusal

AGENT, AGENT_PASSWORD = "agent-7", "demo-agent-7-searches"
HARBOR_AGENT, HARBOR_PASSWORD = "agent-h", "harbor-agent-password"
REVIEWER, REVIEWER_PASSWORD = "rita", "demo-rita-reviews"
CALLBACK = "http://127.0.0.1:9/callback"  # never contacted: the test reads the redirect itself
PRE_REGISTERED = "pre-registered-agent-client"


@dataclass
class Servers:
    console: str  # the issuer, e.g. http://127.0.0.1:PORT
    mcp: str  # the MCP endpoint, e.g. http://127.0.0.1:PORT/mcp
    database: Path
    registration: bool
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def environment(self) -> dict[str, str]:
        return {
            "DATABASE_URL": f"sqlite:///{self.database}",
            "CONSOLE_EMBEDDER": "off",
            "CONSOLE_OAUTH_ISSUER": self.console,
            "CONSOLE_OAUTH_MCP_RESOURCE": self.mcp,
            "CONSOLE_OAUTH_DYNAMIC_REGISTRATION": "1" if self.registration else "0",
        }


def _launch(servers: Servers, folder: Path, console_port: int, mcp_port: int) -> list[str]:
    """Start the console and the MCP server; answers the health URLs to wait for."""
    env = {**os.environ, **servers.environment()}
    commands = {
        "console": ["runserver", "--noreload", f"127.0.0.1:{console_port}"],
        "mcp": ["mcp_server", "--http", "--port", str(mcp_port)],
    }
    for name, args in commands.items():
        with (folder / f"{name}.log").open("wb") as log:
            servers.processes.append(
                subprocess.Popen(  # noqa: S603 - this interpreter and manage.py
                    [sys.executable, "manage.py", *args],
                    cwd=ROOT,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
    return [f"{servers.console}/healthz", f"http://127.0.0.1:{mcp_port}/healthz"]


def _wait_until_serving(servers: Servers, folder: Path, urls: list[str]) -> None:
    deadline = time.monotonic() + 300  # a hang guard only
    for url in urls:
        while True:
            if any(process.poll() is not None for process in servers.processes):
                logs = {p.name: p.read_text(encoding="utf-8") for p in folder.glob("*.log")}
                pytest.fail(f"a server exited: {logs}")
            try:
                if http_status(url) == 200:
                    break
            except OSError:
                pass  # not listening yet
            assert time.monotonic() < deadline, url
            time.sleep(0.1)


def _stop(servers: Servers) -> None:
    for process in servers.processes:
        process.terminate()
    for process in servers.processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def deployments(
    migrated_sqlite: Path, shared_folder: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[bool, Servers]]:
    """Both deployments (registration on and off), set up in one process each and started
    together; stopped after the module."""
    made: dict[bool, Servers] = {}
    # The MCP tests' world (the demo, tenant harbor and its agent), made once per run.
    template, _ = _world(migrated_sqlite, shared_folder)
    world = copy_database(template, tmp_path_factory.mktemp("oauth-world") / "world.sqlite3")
    commands = [
        [
            "add_user",
            HARBOR_AGENT,
            "--role",
            "agent",
            "--tenant",
            "harbor",
            "--password",
            HARBOR_PASSWORD,
        ],
        [
            "createapplication",
            "public",
            "authorization-code",
            "--client-id",
            PRE_REGISTERED,
            "--name",
            "Pre-registered agent",
            "--redirect-uris",
            CALLBACK,
        ],
    ]
    for done in manage_many_on_sqlite(world, *commands, CONSOLE_EMBEDDER="off"):
        assert done.returncode == 0, (done.args, done.stderr + done.stdout)
    with closing(sqlite3.connect(world)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    waits: list[tuple[Servers, Path, list[str]]] = []
    with ExitStack() as stack:
        for registration in (True, False):
            folder = tmp_path_factory.mktemp(f"oauth-{'dcr' if registration else 'static'}")
            console_port, mcp_port = _free_port(), _free_port()
            servers = Servers(
                console=f"http://127.0.0.1:{console_port}",
                mcp=f"http://127.0.0.1:{mcp_port}/mcp",
                database=copy_database(world, folder / "console.sqlite3"),
                registration=registration,
            )
            stack.callback(_stop, servers)
            waits.append((servers, folder, _launch(servers, folder, console_port, mcp_port)))
            made[registration] = servers
        # All four processes start together; then each is waited for.
        for servers, folder, urls in waits:
            _wait_until_serving(servers, folder, urls)
        yield made


class MemoryStorage:
    """The SDK's ``TokenStorage``, in memory."""

    def __init__(self, client: OAuthClientInformationFull | None = None) -> None:
        self.tokens: OAuthToken | None = None
        self.client = client

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """A logged-in console session that consents on the authorisation page, as a person's
    browser does: the login form, then the consent form, each with its CSRF token."""

    def __init__(self, console: str, username: str, password: str) -> None:
        self.console = console
        self.username, self.password = username, password
        self.redirected: asyncio.Future[str] | None = None
        self.pages: list[httpx2.Response] = []

    async def _form_post(
        self, http: httpx2.AsyncClient, url: str, page: httpx2.Response, data: dict[str, str]
    ) -> httpx2.Response:
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, page.text[:2000]
        return await http.post(
            url, data={"csrfmiddlewaretoken": token.group(1), **data}, headers={"Referer": url}
        )

    async def consent(self, authorize_url: str, *, allow: bool = True) -> httpx2.Response:
        async with httpx2.AsyncClient(timeout=60, follow_redirects=False) as http:
            login = f"{self.console}/accounts/login/"
            page = await http.get(login)
            logged_in = await self._form_post(
                http, login, page, {"username": self.username, "password": self.password}
            )
            assert logged_in.status_code == 302, logged_in.text[:2000]
            page = await http.get(authorize_url)
            self.pages.append(page)
            if page.status_code != 200:
                return page
            hidden = dict(
                re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page.text)
            )
            hidden = {name: unescape(value) for name, value in hidden.items()}
            hidden.pop("csrfmiddlewaretoken", None)
            answer = {**hidden, **({"allow": "Authorize"} if allow else {})}
            return await self._form_post(http, authorize_url.split("?")[0], page, answer)


def _provider(
    servers: Servers, browser: Browser, storage: MemoryStorage, *, scope: str | None = None
) -> OAuthClientProvider:
    redirected: dict[str, str] = {}

    async def redirect_handler(url: str) -> None:
        answered = await browser.consent(url)
        assert answered.status_code == 302, (answered.status_code, answered.text[:2000])
        redirected["location"] = answered.headers["location"]

    async def callback_handler() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(redirected["location"]).query)
        assert "code" in query, redirected["location"]
        return AuthorizationCodeResult(
            code=query["code"][0],
            state=query.get("state", [None])[0],
            iss=query.get("iss", [None])[0],
        )

    metadata = OAuthClientMetadata(
        client_name="test agent",
        redirect_uris=[CALLBACK],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope=scope,
    )
    return OAuthClientProvider(
        server_url=servers.mcp,
        client_metadata=metadata,
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )


def _search(servers: Servers, auth: httpx2.Auth, arguments: dict[str, Any] = SEARCH) -> Any:
    async def run() -> Any:
        async with (
            httpx2.AsyncClient(auth=auth, timeout=120) as http,
            Client(streamable_http_client(servers.mcp, http_client=http)) as client,
        ):
            return await client.call_tool("search_knowledge", arguments)

    return asyncio.run(asyncio.wait_for(run(), timeout=240))


def _raw(
    url: str, *, method: str = "GET", token: str | None = None, body: Any = None
) -> tuple[int, dict[str, str], Any]:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - loopback
            text = response.read()
            return (
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                json.loads(text or b"null"),
            )
    except urllib.error.HTTPError as refused:
        text = refused.read()
        try:
            parsed = json.loads(text or b"null")
        except ValueError:
            parsed = text.decode("utf-8", "replace")
        return refused.code, {k.lower(): v for k, v in refused.headers.items()}, parsed


LISTING = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


def test_an_mcp_client_connects_through_discovery_and_registration(
    deployments: dict[bool, Servers],
) -> None:
    """No pre-shared token: the SDK follows the 401 to the metadata, registers, the agent
    account consents, and the tool call answers; the token is stored only as its checksum."""
    servers = deployments[True]
    storage = MemoryStorage()
    browser = Browser(servers.console, AGENT, AGENT_PASSWORD)
    result = _search(servers, _provider(servers, browser, storage))
    assert not result.is_error, result
    assert result.structured_content["evidence"], result.structured_content
    assert storage.client is not None and storage.tokens is not None
    token = storage.tokens.access_token
    assert token.startswith("rco_")
    assert set((storage.tokens.scope or "").split()) == {"agent", "tenant:*"}
    with closing(sqlite3.connect(servers.database)) as db:
        rows = db.execute(
            "SELECT t.token, t.token_checksum, t.resource, u.username"
            " FROM oauth2_provider_accesstoken t JOIN auth_user u ON u.id = t.user_id"
        ).fetchall()
        grants = db.execute(
            "SELECT actor_name, target, details FROM reviewconsole_event"
            " WHERE action = 'agentapi.oauth.grant'"
        ).fetchall()
    checksum = hashlib.sha256(token.encode()).hexdigest()
    stored = [(row[0], json.loads(row[2]), row[3]) for row in rows if row[1] == checksum]
    assert stored == [("", [servers.mcp], AGENT)]  # the checksum only, the audience, the agent
    assert all(token not in json.dumps(row) for row in rows)  # never the token itself
    # The consent is audited: the agent account, the client, the scopes granted.
    target = f"oauth-client:{storage.client.client_id}"
    assert [
        (actor, json.loads(details)["scope"]) for actor, at, details in grants if at == target
    ] == [(AGENT, "agent tenant:*")]


def test_a_pre_registered_client_connects_while_registration_is_off(
    deployments: dict[bool, Servers],
) -> None:
    servers = deployments[False]
    client = OAuthClientInformationFull(
        client_id=PRE_REGISTERED,
        redirect_uris=[CALLBACK],  # type: ignore[list-item]
        token_endpoint_auth_method="none",
        grant_types=["authorization_code", "refresh_token"],
    )
    storage = MemoryStorage(client)
    browser = Browser(servers.console, AGENT, AGENT_PASSWORD)
    result = _search(servers, _provider(servers, browser, storage))
    assert not result.is_error, result
    assert storage.client is not None and storage.client.client_id == PRE_REGISTERED


def test_discovery_and_registration_never_answer_401(deployments: dict[bool, Servers]) -> None:
    """Whatever token is presented (none, a wrong one): the well-known documents and
    ``/register`` answer as documents and JSON, never as a 401 behind the token check."""
    for registration, servers in deployments.items():
        mcp_origin = servers.mcp.removesuffix("/mcp")
        for token in (None, "wrong", "rca_0123456789ab_" + "x" * 43):
            for url in (
                f"{mcp_origin}/.well-known/oauth-protected-resource",
                f"{mcp_origin}/.well-known/oauth-protected-resource/mcp",
                f"{mcp_origin}/.well-known/oauth-authorization-server",
                f"{mcp_origin}/.well-known/openid-configuration",
                f"{servers.console}/.well-known/oauth-authorization-server",
                f"{servers.console}/.well-known/oauth-protected-resource",
                f"{servers.console}/.well-known/oauth-protected-resource/api/v1",
            ):
                status, _, body = _raw(url, token=token)
                assert status in (200, 404) and isinstance(body, dict), (url, token, status, body)
            for url in (f"{mcp_origin}/register", f"{servers.console}/oauth/register/"):
                status, _, body = _raw(
                    url, method="POST", token=token, body={"redirect_uris": [CALLBACK]}
                )
                assert status != 401 and isinstance(body, dict), (url, status, body)
                if not registration:
                    assert (status, body["error"]) == (403, "registration_not_supported"), (
                        url,
                        body,
                    )
        status, _, resource = _raw(f"{mcp_origin}/.well-known/oauth-protected-resource/mcp")
        assert resource["resource"] == servers.mcp
        assert resource["authorization_servers"] == [servers.console]
        status, _, metadata = _raw(f"{servers.console}/.well-known/oauth-authorization-server")
        assert metadata["issuer"] == servers.console
        assert metadata["code_challenge_methods_supported"] == ["S256"]
        # Public: the scopes an agent asks for, never the deployment's tenants.
        assert metadata["scopes_supported"] == ["agent", "tenant:*"]
        assert metadata["response_types_supported"] == ["code"]
        assert ("registration_endpoint" in metadata) is registration
        status, _, api = _raw(f"{servers.console}/.well-known/oauth-protected-resource/api/v1")
        assert api["resource"] == f"{servers.console}/api/v1"


def test_every_401_names_the_resource_metadata(deployments: dict[bool, Servers]) -> None:
    servers = deployments[True]
    mcp_metadata = servers.mcp.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    api_metadata = f"{servers.console}/.well-known/oauth-protected-resource/api/v1"
    for url, metadata, body in (
        (servers.mcp, mcp_metadata, LISTING),
        (f"{servers.console}/api/v1/ping", api_metadata, None),
    ):
        status, headers, _ = _raw(url, method="POST" if body else "GET", body=body)
        assert status == 401
        assert headers["www-authenticate"] == f'Bearer resource_metadata="{metadata}"'
        status, headers, _ = _raw(
            url, method="POST" if body else "GET", token="rco_nope", body=body
        )
        assert status == 401
        challenge = headers["www-authenticate"]
        assert challenge.startswith('Bearer error="invalid_token"'), challenge
        assert f'resource_metadata="{metadata}"' in challenge


def _token_for(servers: Servers, username: str, password: str, *, resource: str, scope: str) -> str:
    """An access token by hand: the authorization request, the consent, the code exchange with
    PKCE S256, as any OAuth client does them."""
    verifier = "v" * 64
    challenge = (
        __import__("base64")
        .urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        .decode()
        .rstrip("=")
    )
    client_id = PRE_REGISTERED if not servers.registration else _registered(servers)
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": CALLBACK,
        "scope": scope,
        "state": "s",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": resource,
    }
    browser = Browser(servers.console, username, password)
    answered = asyncio.run(
        browser.consent(f"{servers.console}/oauth/authorize/?{urlencode(query)}")
    )
    assert answered.status_code == 302, (answered.status_code, answered.text[:2000])
    code = parse_qs(urlsplit(answered.headers["location"]).query)["code"][0]
    exchanged = httpx2.post(
        f"{servers.console}/oauth/token/",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": CALLBACK,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": resource,
        },
    )
    assert exchanged.status_code == 200, exchanged.text
    token: str = exchanged.json()["access_token"]
    return token


_clients: dict[str, str] = {}


def _registered(servers: Servers) -> str:
    if servers.console not in _clients:
        answered = httpx2.post(
            f"{servers.console}/oauth/register/",
            json={
                "redirect_uris": [CALLBACK],
                "token_endpoint_auth_method": "none",
                "grant_types": ["authorization_code", "refresh_token"],
                "client_name": "t",
            },
        )
        assert answered.status_code == 201, answered.text
        _clients[servers.console] = answered.json()["client_id"]
    return _clients[servers.console]


def test_a_token_is_good_only_at_the_resource_it_was_issued_for(
    deployments: dict[bool, Servers],
) -> None:
    servers = deployments[False]
    api = f"{servers.console}/api/v1"
    for_api = _token_for(
        servers, AGENT, AGENT_PASSWORD, resource=api, scope="agent tenant:teahouse"
    )
    for_mcp = _token_for(
        servers, AGENT, AGENT_PASSWORD, resource=servers.mcp, scope="agent tenant:*"
    )
    assert _raw(f"{api}/ping", token=for_api)[0] == 200
    assert _raw(f"{api}/ping", token=for_mcp)[0] == 401  # another resource's token
    assert _raw(servers.mcp, method="POST", token=for_mcp, body=LISTING)[0] == 200
    assert _raw(servers.mcp, method="POST", token=for_api, body=LISTING)[0] == 401
    # The authorization server names only its own resources.
    query = {
        "response_type": "code",
        "client_id": PRE_REGISTERED,
        "redirect_uri": CALLBACK,
        "scope": "agent tenant:*",
        "code_challenge": "c" * 43,
        "code_challenge_method": "S256",
        "resource": "https://elsewhere.example/mcp",
    }
    page = asyncio.run(
        Browser(servers.console, AGENT, AGENT_PASSWORD).consent(
            f"{servers.console}/oauth/authorize/?{urlencode(query)}"
        )
    )
    assert page.status_code == 400 and page.json()["error"] == "invalid_target"


def test_expired_and_revoked_tokens_are_refused_at_the_next_request(
    deployments: dict[bool, Servers],
) -> None:
    servers = deployments[False]
    expiring = _token_for(
        servers, AGENT, AGENT_PASSWORD, resource=servers.mcp, scope="agent tenant:*"
    )
    revoked = _token_for(
        servers, AGENT, AGENT_PASSWORD, resource=servers.mcp, scope="agent tenant:*"
    )
    for token in (expiring, revoked):
        assert _raw(servers.mcp, method="POST", token=token, body=LISTING)[0] == 200
    with closing(sqlite3.connect(servers.database)) as db, db:
        db.execute(
            "UPDATE oauth2_provider_accesstoken SET expires = '2000-01-01 00:00:00'"
            " WHERE token_checksum = ?",
            [_checksum(expiring)],
        )
        # What revoking does (the admin's action, RFC 7009's endpoint): the refresh token is
        # marked revoked and the access token's row deleted.
        db.execute(
            "UPDATE oauth2_provider_refreshtoken SET revoked = '2000-01-01 00:00:00'"
            " WHERE access_token_id IN"
            " (SELECT id FROM oauth2_provider_accesstoken WHERE token_checksum = ?)",
            [_checksum(revoked)],
        )
        db.execute(
            "DELETE FROM oauth2_provider_accesstoken WHERE token_checksum = ?",
            [_checksum(revoked)],
        )
    for token in (expiring, revoked):
        status, headers, body = _raw(servers.mcp, method="POST", token=token, body=LISTING)
        assert (status, body["error"]) == (401, "invalid_token")
        assert headers["www-authenticate"].startswith('Bearer error="invalid_token"')


def test_a_token_reaches_only_the_tenants_its_scopes_and_its_user_share(
    deployments: dict[bool, Servers],
) -> None:
    servers = deployments[False]
    # agent-h is a member of harbor only: asking for teahouse as well grants harbor alone.
    harbor = _token_for(
        servers,
        HARBOR_AGENT,
        HARBOR_PASSWORD,
        resource=servers.mcp,
        scope="agent tenant:harbor tenant:teahouse",
    )
    result = _search(servers, _Bearer(harbor))
    assert refusal(result)["error"] == "forbidden", result
    # agent-7 (every tenant) narrows itself to harbor: teahouse is not there for this token.
    narrowed = _token_for(
        servers, AGENT, AGENT_PASSWORD, resource=servers.mcp, scope="agent tenant:harbor"
    )
    result = _search(servers, _Bearer(narrowed))
    assert refusal(result)["error"] == "forbidden", result
    # A token with no tenant scope acts as no one.
    with closing(sqlite3.connect(servers.database)) as db, db:
        db.execute(
            "UPDATE oauth2_provider_accesstoken SET scope = 'agent' WHERE token_checksum = ?",
            [_checksum(narrowed)],
        )
    assert _raw(servers.mcp, method="POST", token=narrowed, body=LISTING)[0] == 401


def test_only_an_agent_account_may_consent(deployments: dict[bool, Servers]) -> None:
    """A reviewer cannot mint an agent token for themselves; and asking only for tenants the
    agent is not a member of grants nothing."""
    servers = deployments[False]
    query = {
        "response_type": "code",
        "client_id": PRE_REGISTERED,
        "redirect_uri": CALLBACK,
        "scope": "agent tenant:*",
        "code_challenge": "c" * 43,
        "code_challenge_method": "S256",
        "resource": servers.mcp,
    }
    url = f"{servers.console}/oauth/authorize/?{urlencode(query)}"
    page = asyncio.run(Browser(servers.console, REVIEWER, REVIEWER_PASSWORD).consent(url))
    assert page.status_code == 403
    query["scope"] = "agent tenant:teahouse"
    answered = asyncio.run(
        Browser(servers.console, HARBOR_AGENT, HARBOR_PASSWORD).consent(
            f"{servers.console}/oauth/authorize/?{urlencode(query)}"
        )
    )
    assert answered.status_code == 302
    assert parse_qs(urlsplit(answered.headers["location"]).query)["error"] == ["invalid_scope"]


class _Bearer(httpx2.Auth):
    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(
        self, request: httpx2.Request
    ) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


def test_a_wrong_token_with_registration_off_ends_in_a_clear_refusal(
    deployments: dict[bool, Servers],
) -> None:
    """An OAuth-aware client handed a wrong token follows the 401 through discovery; with
    registration off it ends at the server's own words, never at a 401 from discovery or
    registration (the failure mcp-remote and others reported as "registration rejected (401)")."""
    servers = deployments[False]
    storage = MemoryStorage()
    storage.tokens = OAuthToken(access_token="rca_0123456789ab_" + "x" * 43, token_type="Bearer")
    browser = Browser(servers.console, AGENT, AGENT_PASSWORD)
    with pytest.raises(BaseException) as refused:
        _search(servers, _provider(servers, browser, storage))
    message = str(_first_leaf(refused.value))
    assert "registration_not_supported" in message and "403" in message, message
    assert "401" not in message, message
    assert browser.pages == []  # nobody was asked to consent


def _checksum(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
