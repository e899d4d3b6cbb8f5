"""The C allocator's handling of the large blocks a search frees (glibc only).

A search at 100k in one scope allocates some 20 MB of blocks of a megabyte or more and frees
them before the next: the scope's packed array and the query's posting lists as the database
driver hands them over, and the ranking's arrays. glibc serves a block that large with a fresh
memory map (until a freed one raises its threshold) and gives the top of its heap back to the
system once more than twice that threshold lies free there, so the next search maps the same
megabytes again and takes a page fault, with the page zeroed, for every 4 KiB it touches: about
three quarters of the CPU the search spends on its allocations (bench/README.md, "A hundred
thousand in one scope"). :func:`keep_freed_memory` raises both thresholds once per process, so
freed blocks are reused from the heap; the process keeps up to ``trim`` bytes it freed (its
resident size stays near its peak instead of dropping between searches). Nothing else changes:
what is allocated, and every answer, are the same.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

# mallopt's parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
# The largest mmap threshold glibc accepts on 64-bit (HEAP_MAX_SIZE / 2).
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024


def keep_freed_memory(trim: int) -> bool:
    """Serve blocks up to :data:`MMAP_THRESHOLD_MAX` from the heap and keep up to ``trim``
    freed bytes at its top; True when the allocator took both (glibc), False when it is not
    glibc or ``trim`` is 0 (nothing is changed then)."""
    if trim <= 0 or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # not glibc (musl has no mallopt)
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    threshold = min(MMAP_THRESHOLD_MAX, trim)
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold)) and bool(
        mallopt(_M_TRIM_THRESHOLD, max(trim, threshold))
    )
