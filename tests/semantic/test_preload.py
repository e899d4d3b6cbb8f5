"""The embedding model loaded before fork (``gunicorn --preload``) works in the forked workers.

Each case runs in a process of its own: the engine's OpenMP runtime reads its thread count once
per process, and a fork is best made from a process that runs no test machinery. The process
preloads the local model as ``console/wsgi.py`` does, forks a worker that embeds a question through
the coalescing thread (started in the parent before the fork when the parent embedded) and on its
main thread, and compares the worker's vectors with the parent's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HANG_GUARD = 120  # seconds: a worker that hangs fails the test instead of the suite

SCRIPT = r"""
import json, os, select, sys
import django
from django.conf import settings
threads = int(sys.argv[1])
settings.configure(SEMANTIC_EMBEDDER="local", SEMANTIC_LOCAL_THREADS=threads,
                   INSTALLED_APPS=["semantic"], SECRET_KEY="x" * 50)
django.setup()
from semantic import embedders, queries
embedder = embedders.preloaded()
question = "why is my gift card empty"
if threads == 1:
    # The parent has embedded (the warm-up, and a question through the coalescing thread).
    queries.coalescer(embedder).submit("a question before the fork").result(60)
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    try:
        # Through the coalescing thread (new in the worker), and on the worker's main thread,
        # the one that forked.
        vector = queries.coalescer(embedder).submit(question).result(60)
        direct = embedder.queries([question])[0]
        answer = [float(x) for x in vector] if (vector == direct).all() else []
        os.write(write, json.dumps(answer).encode())
    finally:
        os._exit(0)
os.close(write)
chunks = []
while True:
    ready, _, _ = select.select([read], [], [], 60)
    if not ready:
        os.kill(pid, 9)
        print(json.dumps({"worker": "hung"}))
        sys.exit(0)
    chunk = os.read(read, 65536)
    if not chunk:
        break
    chunks.append(chunk)
os.waitpid(pid, 0)
worker = json.loads(b"".join(chunks) or b"null")
mine = [float(x) for x in embedder.queries([question])[0]]
print(json.dumps({"worker": "answered" if worker else "silent", "same": worker == mine}))
"""


@pytest.mark.parametrize("threads", [1, 2])
def test_a_worker_forked_from_a_preloaded_master_embeds_as_the_master(threads: int) -> None:
    done = subprocess.run(  # noqa: S603 (this interpreter and a script of the test)
        [sys.executable, "-c", SCRIPT, str(threads)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"worker": "answered", "same": True}
