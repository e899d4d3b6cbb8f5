"""The production recipe, runnable on one machine: N gunicorn instances and K MCP servers behind
HAProxy, M workers, one PostgreSQL.

    .venv/bin/python scripts/cluster.py                          # 3 web, 2 workers, 1 MCP, :8000
    .venv/bin/python scripts/cluster.py --web 2 --workers 1 --mcp 2 --port 8080 \\
        --database postgres://postgres@127.0.0.1:5432/console
    .venv/bin/python scripts/cluster.py --print-config           # what it would run

The console and the agent API answer at ``http://127.0.0.1:PORT/`` (``--port``, default 8000),
MCP at ``http://127.0.0.1:PORT/mcp`` through HAProxy; behind it the instances listen from
``--first-web-port`` (8101) and the MCP servers from ``--first-mcp-port`` (8201) upwards. HAProxy
must be installed first (``bash scripts/ensure_haproxy.sh``, as root).

HAProxy sends ``/mcp`` to the MCP servers (``manage.py mcp_server --http``, Streamable HTTP) and
every other path to the gunicorn instances, which serve the static files too (WhiteNoise, from
``STATIC_ROOT`` as ``collectstatic`` wrote it).

It creates the database if it is missing, migrates it and collects the static files, starts every
process in a session of its own (so one instance, master and workers, can be stopped or killed as
a unit), waits until each instance and MCP server answers its health check and HAProxy answers
too, then runs until interrupted and stops everything it started. docs/operations.md ("Several instances") shows the commands and the HAProxy
configuration it prints with ``--print-config``; a test holds the two equal.

``--database`` is an administrator's connection, used only to prepare: it creates two roles and
the database (docs/operations.md, "Database roles"). ``NAME_owner`` owns the database and its
tables and runs the migrations; ``NAME_app``, which owns nothing, is no superuser and is no member
of the owner, is what every instance, MCP server and worker connects as, granted by
``manage.py grant_app_role`` after each migrate: it cannot lift the audit tables' guard.

Secrets come from the environment (``DJANGO_SECRET_KEY``, ``AUDIT_HMAC_KEY``); when unset they
are generated once and kept in ``STATE/secrets.env`` (mode 600), so the audit chain signed by one
run verifies in the next. ``STATE`` (``--state``, default ``var/cluster``) also holds the audit
anchor file (``AUDIT_ANCHOR_FILE``; in production put it on other storage), the HAProxy
configuration, its stats socket, the collected static files and each process's log.
"""

from __future__ import annotations

import argparse
import http.client
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[1]
# An administrator's connection: it creates the roles and the database, and nothing else.
DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/console"
# The roles' attributes: neither may create roles or databases, nor is a superuser; the
# application's role inherits nothing (should it ever be granted a role, it must SET ROLE).
OWNER_ROLE = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE"
APP_ROLE = "LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT"
# What HAProxy asks each instance; an instance answering anything else is taken out of rotation.
HEALTH_PATH = "/healthz"
# The MCP endpoint: the one path HAProxy sends to the MCP servers.
MCP_PATH = "/mcp"


@dataclass(frozen=True)
class Recipe:
    """What runs: the numbers and ports of the deployment, and the commands that start it."""

    web: int = 3
    workers: int = 2
    mcp: int = 1
    port: int = 8000
    first_web_port: int = 8101
    first_mcp_port: int = 8201
    processes: int = 2  # gunicorn worker processes per instance
    threads: int = 4  # threads per gunicorn worker process
    database: str = DEFAULT_DATABASE
    python: str = ".venv/bin/python"

    @property
    def database_name(self) -> str:
        return urllib.parse.urlsplit(self.database).path.lstrip("/")

    @property
    def owner_role(self) -> str:
        """Owns the database and its tables; runs the migrations."""
        return f"{self.database_name}_owner"

    @property
    def app_role(self) -> str:
        """What the console's processes connect as: owns nothing, cannot lift the guard."""
        return f"{self.database_name}_app"

    def _as(self, role: str) -> str:
        parsed = urllib.parse.urlsplit(self.database)
        host = parsed.hostname or ""
        netloc = f"{role}@{host}" + (f":{parsed.port}" if parsed.port else "")
        return urllib.parse.urlunsplit(parsed._replace(netloc=netloc))

    @property
    def owner_url(self) -> str:
        return self._as(self.owner_role)

    @property
    def app_url(self) -> str:
        return self._as(self.app_role)

    @property
    def administrator_url(self) -> str:
        """``database``'s server, on its maintenance database: where roles are created."""
        return urllib.parse.urlunsplit(
            urllib.parse.urlsplit(self.database)._replace(path="/postgres")
        )

    def setup_sql(self) -> list[str]:
        """What an administrator runs once: the two roles, the database the owner owns, and
        connecting to it for the two roles only."""
        name, owner, app = self.database_name, self.owner_role, self.app_role
        return [
            f"CREATE ROLE {owner} {OWNER_ROLE};",
            f"CREATE ROLE {app} {APP_ROLE};",
            f"CREATE DATABASE {name} OWNER {owner};",
            f"REVOKE ALL ON DATABASE {name} FROM PUBLIC;",
            f"GRANT CONNECT ON DATABASE {name} TO {app};",
        ]

    @property
    def web_ports(self) -> list[int]:
        return [self.first_web_port + i for i in range(self.web)]

    @property
    def mcp_ports(self) -> list[int]:
        return [self.first_mcp_port + i for i in range(self.mcp)]

    def gunicorn_argv(self, port: int) -> list[str]:
        return [
            self.python,
            "-m",
            "gunicorn",
            "console.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(self.processes),
            "--threads",
            str(self.threads),
            "--preload",
            # Longer than HAProxy keeps an idle connection to an instance, so HAProxy, not
            # gunicorn, closes it: a request is never sent on a connection gunicorn just closed.
            "--keep-alive",
            "30",
            "--graceful-timeout",
            "20",
            # Its default path is one per user: instances on one machine would take it in turn.
            "--no-control-socket",
        ]

    def mcp_argv(self, port: int) -> list[str]:
        return [
            self.python, "manage.py", "mcp_server", "--http", "--host", "127.0.0.1",
            "--port", str(port),
            # As gunicorn's: longer than HAProxy keeps an idle connection to a server.
            "--keep-alive", "30",
        ]  # fmt: skip

    def worker_argv(self, index: int) -> list[str]:
        # The id names the worker in the task rows it claims; unique in the pool.
        return [
            self.python, "manage.py", "worker", "--interval", "1", "--worker-id", f"worker{index + 1}"
        ]  # fmt: skip

    def haproxy_config(self, state: str = "var/cluster") -> str:
        servers = "\n".join(
            f"    server web{i + 1} 127.0.0.1:{port} check" for i, port in enumerate(self.web_ports)
        )
        mcp_servers = "\n".join(
            f"    server mcp{i + 1} 127.0.0.1:{port} check" for i, port in enumerate(self.mcp_ports)
        )
        return f"""\
global
    maxconn 2000
    log stdout format raw local0 info
    stats socket {state}/haproxy.sock mode 600 level admin

defaults
    mode http
    log global
    option httplog
    option http-keep-alive
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout http-keep-alive 10s
    timeout queue 30s

frontend console
    bind 127.0.0.1:{self.port}
    # The instances trust X-Forwarded-Proto (SECURE_PROXY_SSL_HEADER): set it here, never pass
    # on a client's own.
    http-request set-header X-Forwarded-Proto https if {{ ssl_fc }}
    http-request set-header X-Forwarded-Proto http unless {{ ssl_fc }}
    # The instances count login failures against the last X-Forwarded-For entry of a request
    # from here (CONSOLE_TRUSTED_PROXIES): a client's own header is dropped, and this one
    # names the address the client connected from.
    http-request del-header X-Forwarded-For
    option forwardfor
    # The MCP endpoint goes to the MCP servers, every other path (pages, static files, the HTTP
    # API) to the web instances.
    use_backend mcp if {{ path {MCP_PATH} }}
    default_backend web

backend web
    # Round robin, not leastconn: a dead instance holds no connections, so leastconn would send
    # it every retry.
    balance roundrobin
    # A request that could not reach an instance (refused, reset before an answer) is tried
    # again, on another instance (redispatch on every retry), up to 3 times.
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response
    # Only requests that change nothing are sent again after they reached an instance: GET and
    # HEAD, and the knowledge search (a POST that writes nothing). A write whose instance died
    # after receiving it fails (502) and the client decides; a failed connection, which never
    # delivered the request, is retried for every method.
    http-request disable-l7-retry unless METH_GET || {{ path /api/v1/knowledge/search }}
    option httpchk
    http-check send meth GET uri {HEALTH_PATH} hdr Host 127.0.0.1
    http-check expect status 200
    # An instance is out of rotation after 2 failed checks a second apart, or at once when
    # live traffic cannot connect to it; back after 2 good checks.
    default-server inter 1s fall 2 rise 2 observe layer4 error-limit 1 on-error mark-down
    default-server maxconn {self.processes * self.threads}
{servers}

backend mcp
    # Stateless Streamable HTTP (no session id, no stream kept open): any server answers any
    # request. Every MCP request is a POST and a tool call may write, so none is sent twice
    # once a server received it; one that could not connect goes to another server.
    balance roundrobin
    retries 3
    option redispatch 1
    option httpchk
    http-check send meth GET uri {HEALTH_PATH} hdr Host 127.0.0.1
    http-check expect status 200
    default-server inter 1s fall 2 rise 2 observe layer4 error-limit 1 on-error mark-down
{mcp_servers}
"""

    def environment(
        self, secret_key: str, audit_key: str, state: str = "var/cluster"
    ) -> dict[str, str]:
        return {
            "DJANGO_SETTINGS_MODULE": "console.settings_production",
            "DJANGO_SECRET_KEY": secret_key,
            "AUDIT_HMAC_KEY": audit_key,
            # A signed copy of each chain head, outside the database; on other storage in
            # production (docs/operations.md, Audit verification).
            "AUDIT_ANCHOR_FILE": f"{state}/audit-anchor.jsonl",
            "DATABASE_URL": self.app_url,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DJANGO_CSRF_TRUSTED_ORIGINS": f"http://127.0.0.1:{self.port}",
            # Plain HTTP on the loopback here; with TLS at HAProxy leave it at 1.
            "DJANGO_SECURE_SSL_REDIRECT": "0",
            # Where collectstatic writes and each instance serves from (WhiteNoise).
            "DJANGO_STATIC_ROOT": f"{state}/static",
            # HAProxy's address as the instances see it: its X-Forwarded-For entry names the
            # client whose login failures are counted.
            "CONSOLE_TRUSTED_PROXIES": "127.0.0.1",
        }

    def script(self, state: str = "var/cluster") -> str:
        """The commands, as a shell would run them (what docs/operations.md shows)."""
        lines = [
            f"psql {self.administrator_url} <<'SQL'",
            *self.setup_sql(),
            "SQL",
            f"export DATABASE_URL={self.app_url}",
            *[
                f"export {k}={v}"
                for k, v in self.environment("…", "…", state).items()
                if k != "DATABASE_URL"
            ],
            f"DATABASE_URL={self.owner_url} {self.python} manage.py migrate --noinput",
            f"DATABASE_URL={self.owner_url} {self.python} manage.py grant_app_role {self.app_role}",
            f"{self.python} manage.py collectstatic --noinput",
        ]
        for port in self.web_ports:
            lines.append(" ".join(self.gunicorn_argv(port)) + " &")
        for port in self.mcp_ports:
            lines.append(" ".join(self.mcp_argv(port)) + " &")
        for index in range(self.workers):
            lines.append(" ".join(self.worker_argv(index)) + " &")
        lines.append(f"haproxy -db -f {state}/haproxy.cfg")
        return "\n".join(lines)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_run(count: int) -> int:
    """The first of ``count`` consecutive loopback ports nothing listens on now."""
    for _ in range(200):
        first = free_port()
        if first + count > 65535:
            continue
        try:
            for port in range(first + 1, first + count):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return first
    raise RuntimeError(f"no {count} consecutive free ports")


def database_create(recipe: Recipe) -> None:
    """Run the recipe's setup (``Recipe.setup_sql``) as its administrator, each statement that
    is still to do: the roles and the database are made once. A database another role owns
    (one an earlier recipe made as the administrator) is refused: its tables would stay the
    administrator's."""
    import psycopg

    create_owner, create_app, create_database, *access = recipe.setup_sql()
    with psycopg.connect(recipe.administrator_url, autocommit=True) as conn:
        for role, statement in [(recipe.owner_role, create_owner), (recipe.app_role, create_app)]:
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone():
                conn.execute(statement)
        owner = conn.execute(
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s",
            [recipe.database_name],
        ).fetchone()
        if owner is None:
            conn.execute(create_database)
        elif owner[0] != recipe.owner_role:
            raise SystemExit(
                f"database {recipe.database_name} belongs to {owner[0]}, not {recipe.owner_role}:"
                " transfer it and its tables (docs/operations.md, Database roles) or name another"
            )
        for statement in access:
            conn.execute(statement)


def database_drop(url: str) -> None:
    """Drop the database ``url`` names and the two roles the recipe made for it."""
    import psycopg

    recipe = Recipe(database=url)
    with psycopg.connect(recipe.administrator_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{recipe.database_name}" WITH (FORCE)')
        for role in (recipe.app_role, recipe.owner_role):
            conn.execute(f'DROP ROLE IF EXISTS "{role}"')


def _secrets(state: Path) -> tuple[str, str]:
    secret, audit = os.environ.get("DJANGO_SECRET_KEY"), os.environ.get("AUDIT_HMAC_KEY")
    if secret and audit:
        return secret, audit
    kept = state / "secrets.env"
    if kept.exists():
        values = dict(line.split("=", 1) for line in kept.read_text().splitlines() if "=" in line)
        return secret or values["DJANGO_SECRET_KEY"], audit or values["AUDIT_HMAC_KEY"]
    values = {
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "AUDIT_HMAC_KEY": secrets.token_hex(32),
    }
    kept.touch(mode=0o600)
    kept.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return secret or values["DJANGO_SECRET_KEY"], audit or values["AUDIT_HMAC_KEY"]


def http_status(port: int, path: str, timeout: float = 2.0) -> int | None:
    """The status ``GET path`` answers on the loopback ``port``; None when nothing answers."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": "127.0.0.1"})
        return conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: IO[bytes]

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL the process and every process of its session (a gunicorn master's workers)."""
        with suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()

    def stop(self, timeout: float = 20) -> None:
        if self.alive():
            with suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=timeout)
        # Whatever of its session outlived it (never a process of another session).
        with suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()
        self.log.close()


@dataclass
class Cluster:
    """A running deployment: its recipe, environment and processes."""

    recipe: Recipe
    env: dict[str, str]
    state: Path
    web: list[Process] = field(default_factory=list)
    workers: list[Process] = field(default_factory=list)
    mcp: list[Process] = field(default_factory=list)
    haproxy: Process | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.recipe.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.url}{MCP_PATH}"

    def manage(
        self, *args: str, check: bool = True, as_owner: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """``manage.py ARGS`` as the application's role, or (``as_owner``) as the owner's."""
        env = {**self.env, "DATABASE_URL": self.recipe.owner_url} if as_owner else self.env
        result = subprocess.run(  # noqa: S603
            [self.recipe.python, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=900,
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"manage.py {' '.join(args)} failed:\n{result.stderr}{result.stdout}"
            )
        return result

    def _start(self, name: str, argv: Sequence[str]) -> Process:
        log = (self.state / f"{name}.log").open("ab")
        popen = subprocess.Popen(  # noqa: S603
            list(argv),
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return Process(name, popen, log)

    def start_web(self, index: int) -> Process:
        port = self.recipe.web_ports[index]
        return self._start(f"web{index + 1}", self.recipe.gunicorn_argv(port))

    def start_mcp(self, index: int) -> Process:
        port = self.recipe.mcp_ports[index]
        return self._start(f"mcp{index + 1}", self.recipe.mcp_argv(port))

    def start_worker(self, index: int) -> Process:
        return self._start(f"worker{index + 1}", self.recipe.worker_argv(index))

    def wait_ready(self, deadline_seconds: float = 120) -> None:
        """Until every live instance and MCP server answers its health check, and HAProxy
        answers it too."""
        deadline = time.monotonic() + deadline_seconds
        waiting = [
            *[(p.name, port) for p, port in zip(self.web, self.recipe.web_ports, strict=True)],
            *[(p.name, port) for p, port in zip(self.mcp, self.recipe.mcp_ports, strict=True)],
            ("haproxy", self.recipe.port),
        ]
        for name, port in waiting:
            while http_status(port, HEALTH_PATH) != 200:
                process = self.haproxy if name == "haproxy" else self.process(name)
                if process is not None and not process.alive():
                    raise RuntimeError(f"{name} exited; see {self.state / (name + '.log')}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name} did not answer {HEALTH_PATH} on :{port}")
                time.sleep(0.2)

    def process(self, name: str) -> Process | None:
        return next((p for p in [*self.web, *self.mcp, *self.workers] if p.name == name), None)

    def haproxy_stats(self) -> list[dict[str, str]]:
        """HAProxy's ``show stat`` rows (per frontend, server and backend), read on its socket."""
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(self.state / "haproxy.sock"))
            sock.sendall(b"show stat\n")
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        lines = data.decode().strip().splitlines()
        header = lines[0].lstrip("# ").split(",")
        return [dict(zip(header, line.split(","), strict=False)) for line in lines[1:]]

    def stop(self) -> None:
        haproxy = [self.haproxy] if self.haproxy else []
        for process in [*haproxy, *self.web, *self.mcp, *self.workers]:
            process.stop()
        self.web, self.mcp, self.workers, self.haproxy = [], [], [], None


@contextmanager
def running(
    recipe: Recipe, state: Path, extra_env: dict[str, str] | None = None
) -> Iterator[Cluster]:
    """Prepare the database, start the deployment, wait until it answers; stop it on exit."""
    state.mkdir(parents=True, exist_ok=True)
    secret, audit = _secrets(state)
    env = {**os.environ, **recipe.environment(secret, audit, str(state)), **(extra_env or {})}
    cluster = Cluster(recipe, env, state)
    database_create(recipe)
    cluster.manage("migrate", "--noinput", as_owner=True)
    cluster.manage("grant_app_role", recipe.app_role, as_owner=True)
    cluster.manage("collectstatic", "--noinput")
    (state / "haproxy.cfg").write_text(recipe.haproxy_config(str(state)))
    try:
        cluster.web = [cluster.start_web(i) for i in range(recipe.web)]
        cluster.mcp = [cluster.start_mcp(i) for i in range(recipe.mcp)]
        cluster.workers = [cluster.start_worker(i) for i in range(recipe.workers)]
        cluster.haproxy = cluster._start(
            "haproxy", ["haproxy", "-db", "-f", str(state / "haproxy.cfg")]
        )
        cluster.wait_ready()
        yield cluster
    finally:
        cluster.stop()


HAPROXY_MISSING = (
    "HAProxy is not installed (no haproxy on PATH): run `bash scripts/ensure_haproxy.sh` as root "
    "(it installs Debian's haproxy package), then start the cluster again"
)


def haproxy_required() -> None:
    """Stop with what to do when HAProxy, which the recipe puts in front of every instance, is
    not installed (rather than a FileNotFoundError once the database is prepared)."""
    if shutil.which("haproxy") is None:
        raise SystemExit(HAPROXY_MISSING)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--web", type=int, default=3, help="gunicorn instances")
    parser.add_argument("--workers", type=int, default=2, help="manage.py worker processes")
    parser.add_argument("--mcp", type=int, default=1, help="manage.py mcp_server --http processes")
    parser.add_argument("--processes", type=int, default=2, help="gunicorn workers per instance")
    parser.add_argument(
        "--port",
        type=int,
        default=8000,
        help="HAProxy's port: the console at http://127.0.0.1:PORT/, MCP at …:PORT/mcp",
    )
    parser.add_argument(
        "--first-web-port",
        type=int,
        default=8101,
        help="the first gunicorn instance's port, the next ones above it (behind HAProxy)",
    )
    parser.add_argument(
        "--first-mcp-port",
        type=int,
        default=8201,
        help="the first MCP server's port, the next ones above it (behind HAProxy's /mcp)",
    )
    parser.add_argument(
        "--database",
        default=os.environ.get("DATABASE_URL") or DEFAULT_DATABASE,
        help="an administrator's PostgreSQL URL, used only to create the roles and database",
    )
    parser.add_argument(
        "--state",
        default="var/cluster",
        help="where secrets.env, the anchor file, logs and the HAProxy configuration are kept",
    )
    parser.add_argument("--print-config", action="store_true", help="print what it would run")
    args = parser.parse_args()
    if not args.database.startswith(("postgres://", "postgresql://")):
        raise SystemExit("--database must be a PostgreSQL URL: several processes share it")
    if args.mcp < 1:
        raise SystemExit("--mcp must be at least 1: HAProxy sends /mcp to the MCP servers")
    recipe = Recipe(
        web=args.web,
        workers=args.workers,
        mcp=args.mcp,
        port=args.port,
        first_web_port=args.first_web_port,
        first_mcp_port=args.first_mcp_port,
        processes=args.processes,
        database=args.database,
    )
    if args.print_config:
        print(recipe.script(args.state))
        print()
        print(recipe.haproxy_config(args.state), end="")
        return
    haproxy_required()
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stopping.set())
    with running(recipe, ROOT / args.state) as cluster:
        print(
            f"serving at {cluster.url}/ ({recipe.web} web instances, {recipe.workers} workers), "
            f"MCP at {cluster.mcp_url} ({recipe.mcp} servers)"
        )
        print("Ctrl-C stops every process it started", flush=True)
        reported: set[str] = set()
        while not stopping.wait(timeout=1):
            for process in [*cluster.web, *cluster.mcp, *cluster.workers]:
                if not process.alive() and process.name not in reported:
                    reported.add(process.name)
                    print(f"{process.name} exited ({process.popen.returncode})", file=sys.stderr)


if __name__ == "__main__":
    main()
