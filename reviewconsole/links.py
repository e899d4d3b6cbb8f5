"""Console URLs of items named by id: audit targets, impact lists, evidence sources, citations."""

from __future__ import annotations

from django.urls import reverse

from reviewconsole import itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.itemids import ItemId


def item_page(item: ItemId) -> str:
    return reverse(item.kind.url_name, args=item.url_args)


def item_url(text: str) -> str | None:
    """The page of the item ``text`` names, or None when it names none (a file, free text)."""
    try:
        return item_page(itemids.parse(text))
    except ValidationFailure:
        return None
