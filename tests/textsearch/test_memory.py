"""The allocator keeps what a search frees (``textsearch.memory``): the next search's blocks
come from the heap, with no page faults, instead of freshly mapped pages."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from textsearch.memory import keep_freed_memory

# A search's large blocks, in a fresh interpreter: the scope's array as the driver hands it
# over, a copy of it, and the ranking's arrays, allocated, written whole and freed, several
# times; the minor page faults of the last time, before and after keep_freed_memory.
_SEARCH_LIKE = textwrap.dedent(
    """
    import resource, sys
    sys.path.insert(0, {root!r})
    from textsearch.memory import keep_freed_memory

    source = b"x" * (11 << 20)

    def faults_of_one_search():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        blob = bytearray(source)
        copy = bytes(blob)
        ranking = bytearray(source) + bytearray(5 << 20)
        del blob, copy, ranking
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    for _ in range(3):
        faults_of_one_search()
    kept = keep_freed_memory(128 << 20)
    for _ in range(3):
        faults_of_one_search()
    print(kept, faults_of_one_search())
    """
)


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
    reason="mallopt is glibc's",
)
def test_a_search_like_round_of_allocations_faults_no_fresh_pages_once_kept() -> None:
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    out = subprocess.run(  # noqa: S603 (this interpreter, a script of this module)
        [sys.executable, "-c", _SEARCH_LIKE.format(root=root)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    kept, faults = out[0], int(out[1])
    assert kept == "True"
    # The round writes some 38 MB (about 9,700 pages); kept, almost none is faulted in again.
    assert faults < 200


def test_nothing_is_changed_when_nothing_is_to_be_kept() -> None:
    assert keep_freed_memory(0) is False
