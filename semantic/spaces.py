"""The indexes that keep vectors ("spaces"), registered at start-up by the apps that own them.

A space answers the reads the packing needs: the ids of its index scopes, per scope the ids of
its entries (cheap: what the worker compares with the vectors it packed), and the entries with
the item each stands for and the text to embed, all of them or the ones asked for. ``knowledge`` registers its search
index (an entry per document version and store), ``experience`` its retrieval index (an entry
per case, skill and lesson). A registry rather than an import because this app sits below both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    entry: int  # the index entry's primary key
    item: str  # what the vector belongs to (shared by the entries of one item in many scopes)
    text: str  # the text the lexical index reads


@dataclass(frozen=True)
class Space:
    name: str
    scopes: Callable[[], Iterable[int]]
    entries: Callable[[int], list[Entry]]
    # The ids of a scope's entries; its entries among the ids given; and at most ``limit`` of
    # its entries after an entry id, by id (the worker reads only the texts of the entries it
    # has no vector for).
    entry_ids: Callable[[int], list[int]] | None = None
    entries_among: Callable[[int, Sequence[int]], list[Entry]] | None = None
    entries_after: Callable[[int, int, int], list[Entry]] | None = None


_spaces: dict[str, Space] = {}


def space_register(space: Space) -> None:
    _spaces[space.name] = space


def space(name: str) -> Space:
    try:
        return _spaces[name]
    except KeyError:
        raise LookupError(f"no vector space named {name!r} is registered") from None


def every_space() -> list[Space]:
    return [_spaces[name] for name in sorted(_spaces)]
