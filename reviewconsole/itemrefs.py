"""Item titles resolved in batch, so a page that mentions many items stays a fixed number of queries.

Pages show an item mention as its title, kind and short id (the ``item_ref`` tag in
``reviewconsole.templatetags.ids``). The titles come from the apps that own the items, which this
core does not import: each app registers a resolver per kind at start-up (``AppConfig.ready``), and
a resolver answers a whole batch of ids of its kind in one query, leaving out items the user may not
see (another tenant's item is shown by its id only, as if it did not exist).

A view primes the titles of everything its page mentions with ``item_titles(ids, user)`` and puts
the result in the template context as ``item_titles``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from reviewconsole import itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.itemids import ItemId, Kind

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

# The template context name the ``item_ref`` tag reads.
CONTEXT_NAME = "item_titles"

# The titles of ``ids`` (all of one kind) that ``user`` may see; one query per call.
TitleResolver = Callable[[list[ItemId], "User | AnonymousUser | None"], dict[ItemId, str]]
title_resolvers: dict[str, TitleResolver] = {}


def title_resolver_register(kind: Kind, resolver: TitleResolver) -> None:
    title_resolvers[kind.name] = resolver


def item_of(text: object) -> ItemId | None:
    """The item ``text`` names (an id, possibly followed by a part such as ``#rule-3``), or None."""
    if not isinstance(text, str) or not text:
        return None
    try:
        item, _part = itemids.parse_reference(text)
    except ValidationFailure:
        return None
    return item


class ItemTitles(Mapping[ItemId, str]):
    """Titles by item id, resolved once for every id a page mentions."""

    def __init__(self, titles: Mapping[ItemId, str] | None = None) -> None:
        self._titles: dict[ItemId, str] = dict(titles or {})

    def __getitem__(self, item: ItemId) -> str:
        return self._titles[item]

    def __iter__(self) -> Iterator[ItemId]:
        return iter(self._titles)

    def __len__(self) -> int:
        return len(self._titles)

    def title(self, text: object) -> str | None:
        item = item_of(text)
        return None if item is None else self._titles.get(item)

    def merged(self, other: Mapping[ItemId, str]) -> ItemTitles:
        return ItemTitles({**self._titles, **other})


def item_titles(ids: Iterable[object], user: User | AnonymousUser | None) -> ItemTitles:
    """The titles of the items ``ids`` name that ``user`` may see: one query per kind present.

    Anything in ``ids`` that names no item (free text, a file, None) is skipped.
    """
    by_kind: dict[str, set[ItemId]] = {}
    for text in ids:
        item = item_of(text)
        if item is not None:
            by_kind.setdefault(item.kind.name, set()).add(item)
    titles: dict[ItemId, str] = {}
    for kind_name, items in by_kind.items():
        resolver = title_resolvers.get(kind_name)
        if resolver is not None:
            titles.update(resolver(sorted(items), user))
    return ItemTitles(titles)
