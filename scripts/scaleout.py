"""The scale-out test: simulated users against the production recipe, one web instance and one
worker killed with SIGKILL mid-run, then every accepted write and task checked.

    .venv/bin/python scripts/scaleout.py                       # 3 web, 2 workers, 200 users
    .venv/bin/python scripts/scaleout.py --users 20 --requests 12

It starts the deployment of ``scripts/cluster.py`` (``--web`` gunicorn instances behind HAProxy,
``--workers`` workers) on a PostgreSQL database of its own (``--database``, dropped and created
anew), loads the demo world, makes agent accounts with ``add_user`` and their tokens with
``create_token``, and signs every reviewer in through the login form (session and CSRF cookie).
Then each simulated user makes ``--requests`` requests with a pause between them:

- **reviewers** read the dashboard, the review queue, case pages and runs, and approve the cases
  the agents proposed (the case page for the CSRF token, the diagnosis evidence marked checked,
  the approval with a reason);
- **agents** search knowledge, retrieve experience under a run id, report that run's outcome
  and propose cases (each with an incident of its own), with their bearer token.

The run is bounded by the number of requests, not by time. When ``--kill-at`` of them (default
40%) have been answered, one web instance (its gunicorn master and workers) and one worker (while
it holds a task, when it gets one soon) are killed with SIGKILL. An agent whose write failed
sends it again, as a client does; proposing the same case again is answered 200 without a second
row, and reporting the same outcome replaces it.

After the load it waits for the queue to drain (a task a killed worker held goes back to the
queue after the lease, ``CONSOLE_TASK_LEASE_SECONDS``, here 20 s) and checks: every accepted
write present exactly once (cases and their submit events, approvals and their events, run
outcomes), every task finished once (successful, claimed once, or twice when the first claim was
the killed worker's), no task failed, and ``verify_audit`` intact. It prints p50/p95/p99 and
errors per kind; errors are only allowed for requests the killed instance held: writes it had
received (HAProxy sends only requests that change nothing to another instance) and reads whose
answer it had begun to send. Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import signal
import statistics
import sys
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.cluster import ROOT, Cluster, Process, Recipe, database_drop, free_run, running

DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/scaleout"
LEASE_SECONDS = 20
IDLE_REOPEN_SECONDS = 5
# How long after a kill the balancer may still send requests to the dead instance: its health
# check's ``inter 1s fall 2``.
DETECTION_SECONDS = 2.0
SCOPE = {
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "deployment": "release-1",
}
SEARCH = {
    "query": "两杯水果茶，优惠券用不了",
    "tenant": "teahouse",
    "brand": "leaf-and-cup",
    "store": "store-002",
    "campaign": "campaign-b",
    "occurred_at": "2026-09-18T14:00:00+08:00",
    "known_at": "2026-09-18T14:10:00+08:00",
    "facts": {"channel": "miniapp", "product": "fruit-tea", "basket_cents": 3200},
}
# A request HAProxy logged as ended by its server (the session state's first letter "S"): the
# instance closed or reset the connection, here because it was killed.
CUT = re.compile(r" web/(web\d+) \S+ -?\d+ \d+ - - S[A-Z]")
# Requests the load balancer may send to another instance after one died holding them.
IDEMPOTENT = ("GET ", "POST /api/v1/knowledge/search")
# How a read in flight on the killed instance fails: its answer cut, or no answer at all.
CUT_ANSWERS = ("IncompleteRead", "RemoteDisconnected")


def case_body(incident: str) -> dict[str, Any]:
    return {
        "type": "case",
        "scope": dict(SCOPE),
        "incident": incident,
        "title": f"优惠券无法使用（{incident}）",
        "summary": "代理在排查中整理的候选案例。",
        "observations": [{"source_id": f"thread:{incident}#m1", "excerpt": "顾客：优惠券用不了。"}],
        "diagnosis": {
            "statement": "活动B商品列表缺少新品。",
            "evidence": [
                {"source_id": f"thread:{incident}#m4", "excerpt": "运营：新品不在活动商品里。"}
            ],
        },
        "counterevidence": [
            {
                "hypothesis": "缓存未刷新",
                "statement": "刷新后仍失败。",
                "refutes": "仅客户端刷新",
                "evidence": [{"source_id": f"thread:{incident}#m3", "excerpt": "顾客：刷新过了。"}],
            }
        ],
        "outcome": {"statement": "补充商品后恢复。", "evidence": []},
        "valid_from": "2026-09-01T00:00:00+08:00",
        "valid_to": "2027-12-31T00:00:00+08:00",
    }


@dataclass
class Sample:
    what: str  # "METHOD /path-kind"
    kind: str  # reviewer or agent
    began: float
    ms: float
    status: int | None  # None: no answer (connection failed)
    failure: str = ""


@dataclass
class Ledger:
    """What the users did and what the deployment accepted, shared by every user thread."""

    samples: list[Sample] = field(default_factory=list)
    cases: set[str] = field(default_factory=set)  # accepted proposals (case ids)
    to_review: list[str] = field(default_factory=list)  # proposed, not yet taken by a reviewer
    approvals: set[str] = field(default_factory=set)  # case ids whose approval was answered 303
    outcomes: dict[str, str] = field(default_factory=dict)  # run id → outcome accepted last
    answered: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    answered_enough: threading.Event = field(default_factory=threading.Event)
    kill_after: int = 0

    def add(self, sample: Sample) -> None:
        with self.lock:
            self.samples.append(sample)
            self.answered += 1
            if self.kill_after and self.answered >= self.kill_after:
                self.answered_enough.set()


class Client:
    """One user's keep-alive connection to the load balancer, keeping its cookies."""

    def __init__(self, port: int, ledger: Ledger, kind: str) -> None:
        self.port, self.ledger, self.kind = port, ledger, kind
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        self.cookies: dict[str, str] = {}
        self.headers: dict[str, str] = {}
        self.last_used = 0.0

    def request(
        self,
        method: str,
        path: str,
        *,
        form: dict[str, str] | None = None,
        body: Any = None,
        label: str | None = None,
        measured: bool = True,
    ) -> tuple[int | None, bytes]:
        headers = {"Host": "127.0.0.1", **self.headers}
        data: bytes | None = None
        if form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.cookies:
            headers["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        began = time.monotonic()
        if self.last_used and began - self.last_used > IDLE_REOPEN_SECONDS:
            # As a browser does, a connection idle this long is not reused: HAProxy closes idle
            # client connections after 10 s, and a request sent as it closes one gets no answer.
            self.conn.close()
        status: int | None
        failure = ""
        try:
            self.conn.request(method, path, body=data, headers=headers)
            response = self.conn.getresponse()
            payload = response.read()
            status = response.status
            for header, value in response.getheaders():
                if header.lower() == "set-cookie":
                    name, _, rest = value.partition("=")
                    self.cookies[name.strip()] = rest.split(";", 1)[0]
            if response.getheader("Connection", "").lower() == "close":
                self.conn.close()
        except (OSError, http.client.HTTPException) as exc:
            failure = type(exc).__name__
            # The load balancer closed the connection: a client opens a new one. The request
            # counts as failed; the caller decides whether to send it again.
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            status, payload = None, b""
        self.last_used = time.monotonic()
        if measured:
            ms = (time.monotonic() - began) * 1000
            what = label or f"{method} {path}"
            self.ledger.add(Sample(what, self.kind, began, ms, status, failure))
        return status, payload

    def close(self) -> None:
        self.conn.close()


CSRF = re.compile(rb'name="csrfmiddlewaretoken" value="([^"]+)"')


def signed_in(port: int, ledger: Ledger, username: str, password: str) -> Client:
    client = Client(port, ledger, "reviewer")
    status, page = client.request("GET", "/accounts/login/", measured=False)
    token = CSRF.search(page)
    if status != 200 or token is None:
        raise RuntimeError(f"login page answered {status}")
    form = {
        "username": username,
        "password": password,
        "csrfmiddlewaretoken": token.group(1).decode(),
    }
    status, _ = client.request("POST", "/accounts/login/", form=form, measured=False)
    if status != 302:
        raise RuntimeError(f"signing in as {username} answered {status}")
    return client


def reviewer(client: Client, requests: int, pause_ms: tuple[float, float], seed: int) -> None:
    rng = random.Random(seed)
    ledger = client.ledger
    pages = ["/", "/queue/", "/runs/", "/knowledge/"]
    made = 0
    while made < requests:
        time.sleep(rng.uniform(*pause_ms) / 1000)
        with ledger.lock:
            case_id = ledger.to_review.pop(0) if ledger.to_review and made % 3 == 2 else None
        if case_id is None:
            path = pages[made % len(pages)]
            client.request("GET", path)
            made += 1
            continue
        digest = case_id.split(":", 1)[1]
        status, page = client.request("GET", f"/cases/{digest}/", label="GET /cases/ID/")
        made += 1
        token = CSRF.search(page)
        if status != 200 or token is None:
            continue
        csrf = token.group(1).decode()
        status, _ = client.request(
            "POST",
            f"/cases/{digest}/check/",
            form={"key": "diagnosis/0", "note": "matches the thread", "csrfmiddlewaretoken": csrf},
            label="POST /cases/ID/check/",
        )
        made += 1
        if status != 303:
            continue
        status, _ = client.request(
            "POST",
            f"/cases/{digest}/review/",
            form={"decision": "approve", "reason": "evidence checked", "csrfmiddlewaretoken": csrf},
            label="POST /cases/ID/review/",
        )
        made += 1
        if status == 303:
            with ledger.lock:
                ledger.approvals.add(case_id)


def agent(
    client: Client, requests: int, pause_ms: tuple[float, float], seed: int, name: str
) -> None:
    rng = random.Random(seed)
    ledger = client.ledger
    run_id = ""
    made = 0
    while made < requests:
        time.sleep(rng.uniform(*pause_ms) / 1000)
        step = made % 4
        if step == 0:
            client.request("POST", "/api/v1/knowledge/search", body=SEARCH)
        elif step == 1:
            run_id = f"scaleout-{name}-{made}"
            body = {"query": "优惠券无法使用", "run_id": run_id, "scope": SCOPE}
            status, payload = client.request("POST", "/api/v1/experience/retrieve", body=body)
            if status != 200 or not json.loads(payload).get("items"):
                run_id = ""
        elif step == 2 and run_id:
            outcome = rng.choice(["resolved_by_lead", "lead_was_wrong", "unresolved"])
            path = f"/api/v1/runs/{run_id}/outcome"
            for _attempt in range(3):  # a write that got no answer is sent again
                status, _ = client.request(
                    "POST", path, body={"outcome": outcome}, label="POST /api/v1/runs/ID/outcome"
                )
                if status is not None and status < 500:
                    break
            if status == 200:
                with ledger.lock:
                    ledger.outcomes[run_id] = outcome
        elif step == 3 and (made // 4) % 2 == 0:
            body = case_body(f"INC-SO-{name}-{made}")
            for _attempt in range(3):
                status, payload = client.request("POST", "/api/v1/cases", body=body)
                if status is not None and status < 500:
                    break
            if status in (200, 201):
                case_id = json.loads(payload)["id"]
                with ledger.lock:
                    if case_id not in ledger.cases:
                        ledger.cases.add(case_id)
                        ledger.to_review.append(case_id)
        else:
            client.request("GET", "/api/v1/ping")
        made += 1


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else 0.0


@dataclass
class Report:
    users: int
    requests: int
    seconds: float
    p50: float
    p95: float
    p99: float
    errors: list[str]
    errors_allowed: list[str]
    checks: dict[str, bool]
    figures: dict[str, Any]
    accepted: dict[str, int]

    @property
    def ok(self) -> bool:
        return not self.errors and all(self.checks.values())

    def text(self) -> str:
        lines = [
            f"{self.users} users, {self.requests} requests in {self.seconds:.1f} s "
            f"({self.requests / self.seconds:.1f} req/s)",
            f"latency ms: p50 {self.p50:.1f}  p95 {self.p95:.1f}  p99 {self.p99:.1f}",
        ]
        for key, value in self.figures.items():
            lines.append(f"{key}: {value}")
        lines.append(
            f"failed requests the killed instance held (allowed): {len(self.errors_allowed)}"
        )
        lines += [f"  {e}" for e in self.errors_allowed[:10]]
        lines.append(f"other failed requests: {len(self.errors)}")
        lines += [f"  {e}" for e in self.errors[:10]]
        for name, passed in self.checks.items():
            lines.append(f"{'PASS' if passed else 'FAIL'}  {name}")
        return "\n".join(lines)


def pg(cluster: Cluster) -> Any:
    import psycopg

    return psycopg.connect(cluster.recipe.database, autocommit=True)


def kill_holding_a_task(
    cluster: Cluster, worker: Process, tries: int = 300
) -> tuple[str | None, float]:
    """SIGKILL ``worker`` while it holds a task, when it takes one within ``tries`` looks (10 ms
    apart): the id of that task (None when it took none and was killed idle) and the time of the
    kill (``time.time()``).

    Each look freezes the worker (SIGSTOP) before reading the task table, so a task seen running
    is still running, uncommitted, when the SIGKILL lands; otherwise the worker goes on (SIGCONT).
    """
    with pg(cluster) as conn:
        for _ in range(tries):
            os.killpg(worker.popen.pid, signal.SIGSTOP)
            row = conn.execute(
                "SELECT id FROM django_tasks_database_dbtaskresult "
                "WHERE status = 'RUNNING' AND worker_ids->>-1 = %s LIMIT 1",
                [worker.name],
            ).fetchone()
            if row:
                worker.kill()
                return str(row[0]), time.time()
            os.killpg(worker.popen.pid, signal.SIGCONT)
            time.sleep(0.01)
    worker.kill()
    return None, time.time()


# A task not finished: running, or waiting and due. A task queued without a delay, or put back
# in the queue after its worker died, has django-tasks-db's "no delay" run_after, the largest
# date; only the periodic scans wait for a time of their own.
NO_DELAY = "'9999-01-01'"
PENDING = (
    f"status = 'RUNNING' OR (status = 'READY' AND (run_after <= now() OR run_after >= {NO_DELAY}))"
)
# Everything queued but the periodic scans waiting for their time.
QUEUED = f"NOT (status = 'READY' AND run_after > now() AND run_after < {NO_DELAY})"


def drained(cluster: Cluster, deadline_seconds: float) -> bool:
    """Wait until no task is due or running (a killed worker's task waits out its lease)."""
    deadline = time.monotonic() + deadline_seconds
    with pg(cluster) as conn:
        while time.monotonic() < deadline:
            (pending,) = conn.execute(
                f"SELECT count(*) FROM django_tasks_database_dbtaskresult WHERE {PENDING}"
            ).fetchone()
            if pending == 0:
                return True
            time.sleep(0.5)
    return False


def checks(cluster: Cluster, ledger: Ledger, killed_worker: str) -> dict[str, bool]:
    result: dict[str, bool] = {}
    with pg(cluster) as conn:
        cases = sorted(ledger.cases)
        rows = dict(
            conn.execute(
                "SELECT c.id, count(*) FROM experience_case c WHERE c.id = ANY(%s) GROUP BY c.id",
                [cases],
            ).fetchall()
        )
        events = dict(
            conn.execute(
                "SELECT target, count(*) FROM reviewconsole_event "
                "WHERE action = 'experience.case.submit' AND target = ANY(%s) GROUP BY target",
                [cases],
            ).fetchall()
        )
        result[
            f"every accepted case proposal stored once, with one submit event ({len(cases)})"
        ] = all(rows.get(c) == 1 and events.get(c) == 1 for c in cases)
        approved = sorted(ledger.approvals)
        statuses = dict(
            conn.execute(
                "SELECT id, status FROM experience_case WHERE id = ANY(%s)", [approved]
            ).fetchall()
        )
        approve_events = dict(
            conn.execute(
                "SELECT target, count(*) FROM reviewconsole_event "
                "WHERE action = 'experience.case.approve' AND target = ANY(%s) GROUP BY target",
                [approved],
            ).fetchall()
        )
        result[
            f"every accepted approval applied once, with one approve event ({len(approved)})"
        ] = all(statuses.get(c) == "approved" and approve_events.get(c) == 1 for c in approved)
        runs = sorted(ledger.outcomes)
        stored = conn.execute(
            "SELECT run_id, outcome FROM experience_runoutcome WHERE run_id = ANY(%s)", [runs]
        ).fetchall()
        counts = Counter(run for run, _ in stored)
        result[f"every accepted outcome stored once, as last reported ({len(runs)})"] = (
            all(counts[run] == 1 for run in runs) and dict(stored) == ledger.outcomes
        )
        tasks = conn.execute(
            f"SELECT status, worker_ids, task_path FROM django_tasks_database_dbtaskresult "
            f"WHERE {QUEUED}"
        ).fetchall()
        finished_once = [
            status == "SUCCESSFUL"
            and (len(ids) == 1 or (len(ids) == 2 and ids[0] == killed_worker))
            for status, ids, _ in tasks
        ]
        result[f"every queued task finished once ({len(tasks)} tasks)"] = all(finished_once)
        indexed = conn.execute(
            "SELECT count(*) FROM django_tasks_database_dbtaskresult "
            "WHERE task_path = 'curation.tasks.case_index_task' AND status = 'SUCCESSFUL'"
        ).fetchone()[0]
        result["a near-duplicate indexing task ran for every accepted proposal"] = indexed >= len(
            cases
        )
    audit = cluster.manage("verify_audit", "--json", check=False)
    result["verify_audit intact"] = audit.returncode == 0 and json.loads(audit.stdout)["ok"] is True
    return result


def load_demo(cluster: Cluster) -> dict[str, Any]:
    """The demo world in the cluster's database: what ``load_demo --json`` answers."""
    demo: dict[str, Any] = json.loads(cluster.manage("load_demo", "--json", "--no-replay").stdout)
    return demo


def prepare(
    cluster: Cluster, agents: int, demo: dict[str, Any] | None = None
) -> tuple[dict[str, str], list[str]]:
    """Demo world (unless ``demo`` says it is loaded), reviewers' passwords, and ``agents``
    agent accounts' tokens."""
    demo = demo or load_demo(cluster)
    reviewers = {u["username"]: u["password"] for u in demo["users"] if u["role"] == "reviewer"}
    tokens = []
    for n in range(agents):
        name = f"scaleout-agent-{n + 1}"
        cluster.manage("add_user", name, "--role", "agent", "--tenant", "teahouse")
        tokens.append(json.loads(cluster.manage("create_token", name, "--json").stdout)["token"])
    return reviewers, tokens


def load(
    cluster: Cluster,
    *,
    users: int,
    requests: int,
    pause_ms: tuple[float, float],
    kill_at: float | None,
    agent_accounts: int,
    seed: int = 29,
    demo: dict[str, Any] | None = None,
) -> Report:
    reviewers_pw, tokens = prepare(cluster, agent_accounts, demo)
    port = cluster.recipe.port
    ledger = Ledger()
    reviewer_count = max(1, users // 5)
    names = sorted(reviewers_pw)
    clients: list[Client] = []
    # Every reviewer signs in first (password hashing is slow by design), a few at a time.
    sign_ins: list[threading.Thread] = []
    signed: dict[int, Client] = {}

    def sign_in(i: int) -> None:
        name = names[i % len(names)]
        signed[i] = signed_in(port, ledger, name, reviewers_pw[name])

    for i in range(reviewer_count):
        sign_ins.append(threading.Thread(target=sign_in, args=(i,)))
    for batch in range(0, len(sign_ins), 8):
        for thread in sign_ins[batch : batch + 8]:
            thread.start()
        for thread in sign_ins[batch : batch + 8]:
            thread.join()
    threads = []
    for i in range(users):
        if i < reviewer_count:
            client = signed[i]
            threads.append(
                threading.Thread(target=reviewer, args=(client, requests, pause_ms, seed + i))
            )
        else:
            client = Client(port, ledger, "agent")
            client.headers["Authorization"] = f"Bearer {tokens[i % len(tokens)]}"
            threads.append(
                threading.Thread(target=agent, args=(client, requests, pause_ms, seed + i, f"u{i}"))
            )
        clients.append(client)
    ledger.kill_after = int(users * requests * kill_at) if kill_at else 0
    figures: dict[str, Any] = {}
    killed_at = killed_wall = 0.0
    killed_worker = ""
    held_task: str | None = None
    began = time.monotonic()
    for thread in threads:
        thread.start()
    if kill_at:
        # Ends when that many requests were answered (or every user finished).
        while not ledger.answered_enough.wait(timeout=1):
            if not any(t.is_alive() for t in threads):
                break
        web = cluster.web[1]
        worker = cluster.workers[-1]
        killed_worker = worker.name
        trigger = ledger.answered
        killed_at = time.monotonic()
        web.kill()
        held_task, killed_wall = kill_holding_a_task(cluster, worker)
        figures["killed"] = (
            f"{web.name} and {worker.name} (SIGKILL) after {trigger} answered requests, "
            f"{killed_at - began:.1f} s in; {worker.name} "
            + (f"held task {held_task}" if held_task else "held no task at that moment")
        )
    for thread in threads:
        thread.join()
    seconds = time.monotonic() - began
    for client in clients:
        client.close()
    if not drained(cluster, deadline_seconds=LEASE_SECONDS * 2 + 60):
        figures["queue"] = "did not drain"
    reclaimed: dict[str, bool] = {}
    if held_task:
        with pg(cluster) as conn:
            status, ids, started = conn.execute(
                "SELECT status, worker_ids, started_at FROM django_tasks_database_dbtaskresult "
                "WHERE id = %s",
                [held_task],
            ).fetchone()
        again = len(ids) > 1 and started is not None
        picked = f"{started.timestamp() - killed_wall:.1f} s" if again else "not"
        figures["killed worker's task"] = (
            f"{status}, claimed by {', '.join(ids)}; claimed again {picked} after the kill "
            f"(lease {LEASE_SECONDS} s, looked for every {LEASE_SECONDS / 4:g} s)"
        )
        reclaimed["the task the killed worker held ran again on another worker"] = (
            status == "SUCCESSFUL" and again and ids[0] == killed_worker
        )
    stats = {row["svname"]: row for row in cluster.haproxy_stats() if row["pxname"] == "web"}
    cut = Counter(
        match.group(1)
        for match in CUT.finditer((cluster.state / "haproxy.log").read_text(errors="replace"))
    )
    figures["balancer log, requests an instance cut off"] = dict(cut) or "none"
    figures["haproxy"] = (
        f"retries {stats['BACKEND']['wretr']}, redispatches {stats['BACKEND']['wredis']}"
    )
    samples = ledger.samples
    latencies = [s.ms for s in samples if s.status is not None and s.status < 500]
    errors: list[str] = []
    allowed: list[str] = []
    instance_slots = cluster.recipe.processes * cluster.recipe.threads
    for s in sorted(samples, key=lambda s: s.began):
        if s.status is not None and s.status < 500:
            continue
        line = f"{s.what} -> {s.status or s.failure} at {s.began - began:.1f} s"
        # Held by the killed instance: in flight at the kill, or sent to it before the balancer
        # took it out of rotation (at the first refused connection, at most two checks later).
        # HAProxy sends a request that changes nothing to another instance, unless the dead one
        # had it already: its answer is then cut (IncompleteRead), or the connection closes before
        # any byte of it (RemoteDisconnected: HAProxy resends no POST, and a search is one), and
        # nothing can resend it. Only a request in flight at the very kill may fail so.
        ends = s.began + s.ms / 1000
        in_flight = bool(killed_at) and s.began <= killed_at <= ends
        held = bool(killed_at) and s.began <= killed_at + DETECTION_SECONDS and ends >= killed_at
        if s.what.startswith(IDEMPOTENT):
            held = in_flight and s.failure in CUT_ANSWERS
        if held and len(allowed) < instance_slots:
            allowed.append(line)
        else:
            errors.append(line)
    answers = Counter(f"{s.what} {s.status or 'no answer'}" for s in samples)
    figures["answers"] = ", ".join(f"{k}: {v}" for k, v in sorted(answers.items()))
    by_kind = {
        kind: [s.ms for s in samples if s.kind == kind and s.status and s.status < 500]
        for kind in ("reviewer", "agent")
    }
    for kind, values in by_kind.items():
        if values:
            figures[f"{kind} p50/p95/p99 ms"] = (
                f"{statistics.median(values):.1f} / {percentile(values, 0.95):.1f} / "
                f"{percentile(values, 0.99):.1f} ({len(values)} requests)"
            )
    return Report(
        users=users,
        requests=len(samples),
        seconds=seconds,
        p50=statistics.median(latencies) if latencies else 0.0,
        p95=percentile(latencies, 0.95),
        p99=percentile(latencies, 0.99),
        errors=errors,
        errors_allowed=allowed,
        checks={**checks(cluster, ledger, killed_worker), **reclaimed},
        accepted={
            "cases": len(ledger.cases),
            "approvals": len(ledger.approvals),
            "outcomes": len(ledger.outcomes),
        },
        figures=figures,
    )


# The environment the scale-out deployment runs in, beside the recipe's own.
ENVIRONMENT = {
    # Every simulated agent account makes many requests a minute; the per-account limit
    # would measure itself.
    "CONSOLE_API_RATE": "",
    # The vector branch off: the load measures the deployment, not the local model.
    "CONSOLE_EMBEDDER": "off",
    "CONSOLE_TASK_LEASE_SECONDS": str(LEASE_SECONDS),
}


def recipe_on_free_ports(
    *, database: str, web: int, workers: int, processes: int, mcp: int = 1
) -> Recipe:
    """The recipe with HAProxy, the instances and the MCP servers on free loopback ports."""
    port = free_run(web + mcp + 1)
    return Recipe(
        web=web,
        workers=workers,
        mcp=mcp,
        processes=processes,
        port=port,
        first_web_port=port + 1,
        first_mcp_port=port + 1 + web,
        database=database,
    )


def scaleout(
    *,
    users: int,
    requests: int,
    database: str = DEFAULT_DATABASE,
    web: int = 3,
    workers: int = 2,
    processes: int = 2,
    pause_ms: tuple[float, float] = (200, 600),
    kill_at: float | None = 0.4,
    agent_accounts: int = 8,
    state: Path | None = None,
) -> Report:
    database_drop(database)
    recipe = recipe_on_free_ports(database=database, web=web, workers=workers, processes=processes)
    with running(recipe, state or ROOT / "var" / "scaleout", ENVIRONMENT) as cluster:
        return load(
            cluster,
            users=users,
            requests=requests,
            pause_ms=pause_ms,
            kill_at=kill_at,
            agent_accounts=agent_accounts,
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--requests", type=int, default=20, help="requests per user")
    parser.add_argument("--web", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--processes", type=int, default=2, help="gunicorn workers per instance")
    parser.add_argument("--database", default=DEFAULT_DATABASE)
    parser.add_argument("--pause-ms", default="200,600", help="MIN,MAX pause before each request")
    parser.add_argument("--kill-at", type=float, default=0.4, help="0 kills nothing")
    parser.add_argument("--agents", type=int, default=8, help="agent accounts (tokens)")
    args = parser.parse_args()
    low, high = (float(x) for x in args.pause_ms.split(","))
    report = scaleout(
        users=args.users,
        requests=args.requests,
        database=args.database,
        web=args.web,
        workers=args.workers,
        processes=args.processes,
        pause_ms=(low, high),
        kill_at=args.kill_at or None,
        agent_accounts=args.agents,
    )
    print(report.text())
    sys.exit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
