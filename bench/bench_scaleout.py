"""Scale-out figures (issue 29): API search throughput at 1, 2 and 3 instances in one run, p99
under 200 users, and how long a killed worker's task waits before another worker takes it.

    .venv/bin/python bench/bench_scaleout.py                       # both parts
    .venv/bin/python bench/bench_scaleout.py --skip-users          # throughput only
    .venv/bin/python bench/bench_scaleout.py --rounds 5 --duration 5 --connections 16

**Throughput.** The production recipe (``scripts/cluster.py``: 3 gunicorn instances of
``--processes`` worker processes with 4 threads each, behind HAProxy, 2 workers, one PostgreSQL
database of its own) with the demo world and one agent token. The arms take instances out of
HAProxy's rotation through its stats socket (``set server web/webN state maint``), so 1, 2 and 3
instances are measured against the same processes and data, in rounds whose order rotates. Each
arm is ``--duration`` seconds of ``wrk`` (one client thread, ``--connections`` keep-alive
connections) sending ``POST /api/v1/knowledge/search`` through HAProxy; without wrk
(``apt-get install wrk``) Python threads send a fixed number of requests instead. During each arm
the CPU time of every group of processes is read from ``/proc``: the instances (each gunicorn
master and its workers), this database's PostgreSQL backends, HAProxy, the load generator, and
the whole machine, which says where the work went when throughput stopped growing.

**200 users.** ``scripts/scaleout.py``'s full run (200 users, 20 requests each, one instance and
one worker killed with SIGKILL at 40%): its p50/p95/p99, failures and checks, and the time from
the worker's kill to another worker's claim of the task it held (the lease there is 20 s; the
default ``CONSOLE_TASK_LEASE_SECONDS`` is 600 s).

The rate limit is off (one token sends everything) and so is the vector branch (the figures are
the deployment's, not the local model's). It reports; it asserts nothing.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.bench_api import SEARCH, request_once, run_wrk, wrk_script  # noqa: E402
from scripts.cluster import Cluster, Recipe, database_drop, free_run, running  # noqa: E402
from scripts.scaleout import scaleout  # noqa: E402

DATABASE = "postgres://postgres@127.0.0.1:5432/bench_scaleout"
TICKS = os.sysconf("SC_CLK_TCK")


def proc_stat(pid: int) -> tuple[int, float] | None:
    """(process group, CPU seconds) of ``pid``, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[2]), (int(fields[11]) + int(fields[12])) / TICKS


def machine_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return float(sum(values) - idle), float(sum(values))


def cpu_by_group(cluster: Cluster, backends: set[int], generator: set[int]) -> dict[str, float]:
    groups = {p.popen.pid: p.name for p in cluster.web}
    haproxy = cluster.haproxy.popen.pid if cluster.haproxy else -1
    totals = dict.fromkeys(["instances", "postgres", "haproxy", "generator"], 0.0)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        stat = proc_stat(pid)
        if stat is None:
            continue
        group, seconds = stat
        if group in groups:
            totals["instances"] += seconds
        elif pid in backends:
            totals["postgres"] += seconds
        elif group == haproxy:
            totals["haproxy"] += seconds
        elif pid in generator:
            totals["generator"] += seconds
    return totals


def backend_pids(cluster: Cluster) -> set[int]:
    import psycopg

    with psycopg.connect(cluster.recipe.database, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        me = row[0] if row else 0
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> %s",
            [me],
        ).fetchall()
    return {int(pid) for (pid,) in rows}


def haproxy_command(cluster: Cluster, command: str) -> str:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(cluster.state / "haproxy.sock"))
        sock.sendall(command.encode() + b"\n")
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data.decode()


def rotation(cluster: Cluster, instances: int) -> None:
    """Only the first ``instances`` instances in HAProxy's rotation."""
    for index in range(cluster.recipe.web):
        state = "ready" if index < instances else "maint"
        haproxy_command(cluster, f"set server web/web{index + 1} state {state}")


@dataclass
class Arm:
    instances: int
    rates: list[float]
    p99s: list[float]
    errors: int
    cpu: dict[str, float]  # CPU seconds per wall second, per group, summed over rounds
    busy: float  # the machine's busy share over the arm's rounds
    seconds: float


def python_load(
    port: int, headers: dict[str, str], connections: int, count: int
) -> tuple[float, float, int]:
    """(rate, p99 ms, errors) of ``count`` searches from ``connections`` threads."""
    latencies: list[float] = []
    errors = [0]
    remaining = [count]
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if remaining[0] <= 0:
                    return
                remaining[0] -= 1
            began = time.perf_counter()
            try:
                ok = request_once(port, SEARCH, headers) == 200
            except OSError:
                ok = False
            with lock:
                latencies.append(time.perf_counter() - began)
                errors[0] += not ok

    pool = [threading.Thread(target=worker) for _ in range(connections)]
    began = time.perf_counter()
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - began
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    return (count - errors[0]) / elapsed, p99, errors[0]


def throughput(args: argparse.Namespace) -> list[Arm]:
    import json

    database_drop(DATABASE)
    port = free_run(4)
    recipe = Recipe(
        web=3, workers=2, processes=args.processes, port=port, first_web_port=port + 1,
        database=DATABASE,
    )  # fmt: skip
    env = {"CONSOLE_API_RATE": "", "CONSOLE_EMBEDDER": "off"}
    state = Path(tempfile.mkdtemp(prefix="bench-scaleout-"))
    with running(recipe, state, env) as cluster:
        cluster.manage("load_demo", "--no-replay")
        cluster.manage("add_user", "bench-agent", "--role", "agent", "--tenant", "teahouse")
        token = json.loads(cluster.manage("create_token", "bench-agent", "--json").stdout)["token"]
        arms = throughput_on(cluster, token, args)
    database_drop(DATABASE)
    shutil.rmtree(state, ignore_errors=True)
    return arms


def throughput_on(cluster: Cluster, token: str, args: argparse.Namespace) -> list[Arm]:
    """The arms of 1, 2 and 3 instances measured on a running deployment of 3 instances (its
    demo world loaded), searching as the agent ``token`` acts as; all 3 in rotation after."""
    if cluster.recipe.web != 3:
        raise SystemExit(
            f"the arms take 1, 2 and 3 of 3 instances; this one has {cluster.recipe.web}"
        )
    port, state = cluster.recipe.port, cluster.state
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    use_wrk = shutil.which("wrk") is not None and args.generator != "python"
    script = wrk_script(state, SEARCH, headers) if use_wrk else None
    try:
        # Warm-up: every instance's threads open their connection and run the search once.
        rotation(cluster, 3)
        if script:
            run_wrk(port, script, args.connections, 3)
        else:
            python_load(port, headers, args.connections, args.warmup)
        arms = {n: Arm(n, [], [], 0, {}, 0.0, 0.0) for n in (1, 2, 3)}
        busy_jiffies = dict.fromkeys(arms, 0.0)
        all_jiffies = dict.fromkeys(arms, 0.0)
        for round_number in range(args.rounds):
            order = [1, 2, 3][round_number % 3 :] + [1, 2, 3][: round_number % 3]
            for n in order:
                rotation(cluster, n)
                backends = backend_pids(cluster)
                before_cpu = cpu_by_group(cluster, backends, set())
                before_busy = machine_busy()
                began = time.perf_counter()
                children = resource.getrusage(resource.RUSAGE_CHILDREN)
                own = time.process_time()
                if script:
                    result = run_wrk(port, script, args.connections, args.duration)
                    rate, p99, errors = result.rate(), result.percentile(99), result.errors
                else:
                    rate, p99, errors = python_load(port, headers, args.connections, args.count)
                done = resource.getrusage(resource.RUSAGE_CHILDREN)
                generator_cpu = (
                    done.ru_utime
                    + done.ru_stime
                    - children.ru_utime
                    - children.ru_stime
                    + time.process_time()
                    - own
                )
                elapsed = time.perf_counter() - began
                after_busy = machine_busy()
                after_cpu = cpu_by_group(cluster, backends | backend_pids(cluster), set())
                arm = arms[n]
                arm.rates.append(rate)
                arm.p99s.append(p99)
                arm.errors += errors
                arm.seconds += elapsed
                for group, value in after_cpu.items():
                    arm.cpu[group] = arm.cpu.get(group, 0.0) + value - before_cpu.get(group, 0.0)
                arm.cpu["generator"] = arm.cpu.get("generator", 0.0) + generator_cpu
                busy_jiffies[n] += after_busy[0] - before_busy[0]
                all_jiffies[n] += after_busy[1] - before_busy[1]
        for n, arm in arms.items():
            arm.busy = busy_jiffies[n] / all_jiffies[n] if all_jiffies[n] else 0.0
    finally:
        rotation(cluster, 3)
    return list(arms.values())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5, help="seconds per arm under wrk")
    parser.add_argument("--count", type=int, default=600, help="searches per arm without wrk")
    parser.add_argument("--warmup", type=int, default=300, help="searches before, without wrk")
    parser.add_argument("--connections", type=int, default=12)
    parser.add_argument("--processes", type=int, default=1, help="gunicorn workers per instance")
    parser.add_argument("--generator", choices=("auto", "python"), default="auto")
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--skip-users", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="1 round of 12 searches per arm from 2 Python threads, no 200-user run: the test "
        "suite's check that the script still runs (its figures mean nothing)",
    )
    args = parser.parse_args(argv)
    if args.tiny:
        args.rounds, args.count, args.warmup, args.connections = 1, 12, 6, 2
        args.generator, args.skip_users = "python", True
    return args


def print_throughput(arms: list[Arm], args: argparse.Namespace) -> None:
    cores = os.cpu_count() or 1
    generator = "wrk" if shutil.which("wrk") and args.generator != "python" else "python"
    print(
        f"\nPOST /api/v1/knowledge/search through HAProxy, {args.connections} connections "
        f"({generator}), {args.processes} gunicorn process(es) x 4 threads per instance, "
        f"{args.rounds} rounds"
    )
    print(
        f"{'instances':>9} {'req/s':>8} {'x 1':>6} {'of linear':>9} {'p99 ms':>8} "
        f"{'errors':>6}  CPU s per s: instances / postgres / haproxy / load   machine busy"
    )
    base = statistics.median(arms[0].rates)
    for arm in arms:
        rate = statistics.median(arm.rates)
        cpu = {k: v / arm.seconds for k, v in arm.cpu.items()}
        print(
            f"{arm.instances:>9} {rate:>8.1f} {rate / base:>6.2f} "
            f"{rate / (base * arm.instances):>9.2f} {statistics.median(arm.p99s):>8.1f} "
            f"{arm.errors:>6}  {cpu['instances']:.2f} / {cpu['postgres']:.2f} / "
            f"{cpu['haproxy']:.2f} / {cpu['generator']:.2f}   {arm.busy:.0%} of {cores} cores"
        )
    for previous, arm in itertools.pairwise(arms):
        ratio = statistics.median(arm.rates) / statistics.median(previous.rates)
        linear = arm.instances / previous.instances
        print(
            f"{previous.instances} -> {arm.instances} instances: x{ratio:.2f} "
            f"({ratio / linear:.2f} of linear; target >= 0.8 until the database saturates)"
        )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cores = os.cpu_count() or 1
    print(f"machine: {cores} cores, load average {os.getloadavg()[0]:.1f} at the start")
    if not args.skip_throughput:
        print_throughput(throughput(args), args)
    if not args.skip_users:
        print(f"\n{args.users} users, {args.requests} requests each (scripts/scaleout.py):")
        report = scaleout(users=args.users, requests=args.requests, processes=2)
        print(report.text())
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
