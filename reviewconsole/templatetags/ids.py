"""How pages show an item id: ``{% item_ref item.id %}``, or in little room ``{{ item.id|short_id }}``.

The one place that decides the short form: a case or skill id shows its kind and the first
``SHOWN_HEX`` hex digits of its digest, and the full id in a ``title`` attribute. An id that is
short already (``doc:KEY@N``) or that names no item shows whole.
"""

from __future__ import annotations

from django import template
from django.contrib.auth.models import AnonymousUser, User
from django.template import Context
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext, gettext_lazy

from reviewconsole import itemids
from reviewconsole.errors import ValidationFailure
from reviewconsole.itemids import Shape
from reviewconsole.itemrefs import CONTEXT_NAME, ItemTitles, item_of
from reviewconsole.links import item_page, may_open, source_url

register = template.Library()

SHOWN_HEX = 12


def shortened(text: str) -> str:
    """The short form of ``text``: ``case:0123456789ab…`` for a content-named id, else ``text``."""
    try:
        item = itemids.parse(text)
    except ValidationFailure:
        return text
    if item.kind.shape is not Shape.DIGEST:
        return text
    return f"{item.kind.prefix}{item.digest[:SHOWN_HEX]}…"


@register.filter
def short_id(value: object) -> SafeString | str:
    if value is None or value == "":
        return ""
    text = str(value)
    return format_html('<span class="mono" title="{}">{}</span>', text, shortened(text))


# --- item mentions: title, kind, short id, link, copy ----------------------------------------

KIND_LABELS = {
    "case": gettext_lazy("case"),
    "skill": gettext_lazy("skill"),
    "lesson": gettext_lazy("lesson"),
    "document": gettext_lazy("document"),
}


def copy_button_html(text: str) -> SafeString:
    """A button copying ``text``; hidden until console.js shows it (it needs script)."""
    return format_html(
        '<button type="button" class="copy-id small secondary" data-copy="{}" hidden'
        ' data-copied-label="{}" aria-label="{}">{}</button>',
        text,
        gettext("Copied"),
        gettext("Copy id %(id)s") % {"id": shortened(text)},
        gettext("Copy"),
    )


def item_ref_html(value: object, titles: ItemTitles | None) -> SafeString | str:
    """An item mention: its title (linked to its page), its kind and its short id, the full id on
    hover and a copy button. Text naming no item shows as it is."""
    if value is None or value == "":
        return ""
    text = str(value)
    item = item_of(text)
    if item is None:
        return format_html('<span class="mono item-text">{}</span>', text)
    full = str(item)
    part = text[len(full) :]
    url = item_page(item) + part
    title = titles.title(text) if titles is not None else None
    short = shortened(full) + part
    label = KIND_LABELS.get(item.kind.name, item.kind.name)
    if title:
        return format_html(
            '<span class="item-ref"><a href="{}" title="{}">{}</a>'
            ' <span class="item-kind">{}</span>'
            ' <code class="item-id" title="{}">{}</code>{}</span>',
            url,
            text,
            title,
            label,
            text,
            short,
            copy_button_html(full),
        )
    return format_html(
        '<span class="item-ref"><span class="item-kind">{}</span>'
        ' <a class="item-id" href="{}" title="{}"><code>{}</code></a>{}</span>',
        label,
        url,
        text,
        short,
        copy_button_html(full),
    )


@register.simple_tag(takes_context=True)
def item_ref(context: Context, value: object, title: str = "") -> SafeString | str:
    """``{% item_ref some_id %}``: titles come from ``item_titles`` in the context, which the view
    primes for every id on the page (``reviewconsole.itemrefs.item_titles``) so the page makes
    no query per mention. ``{% item_ref some_id title=known_title %}`` where the page has it."""
    titles: ItemTitles | None = context.get(CONTEXT_NAME)
    if title:
        item = item_of(str(value))
        if item is not None:
            titles = (titles or ItemTitles()).merged({item: str(title)})
    return item_ref_html(value, titles)


@register.simple_tag
def copy_button(value: object) -> SafeString | str:
    """``{% copy_button run_id %}``: a copy button for an id that is not an item (a run id)."""
    if value is None or value == "":
        return ""
    return copy_button_html(str(value))


def _viewer(context: Context) -> User | AnonymousUser | None:
    request = context.get("request")
    return getattr(request, "user", None)


@register.simple_tag(takes_context=True)
def run_ref(context: Context, run_id: object, url: str = "") -> SafeString | str:
    """``{% run_ref run_id url %}``: a run id that never wraps mid-word, linked (where the viewer
    may open the page), with a copy button."""
    if run_id is None or run_id == "":
        return ""
    text = str(run_id)
    if url and may_open(_viewer(context), url):
        return format_html(
            '<span class="run-ref"><a class="run-id" href="{}">{}</a>{}</span>',
            url,
            text,
            copy_button_html(text),
        )
    return format_html(
        '<span class="run-ref"><span class="run-id">{}</span>{}</span>',
        text,
        copy_button_html(text),
    )


@register.simple_tag(takes_context=True)
def source_ref(context: Context, value: object) -> SafeString | str:
    """``{% source_ref evidence.source_id %}``: an evidence source, linked where it points to a
    page: an item (shown like ``item_ref``), a thread message (the thread, opened at the message,
    which is highlighted), a run."""
    if value is None or value == "":
        return ""
    text = str(value)
    if item_of(text) is not None:
        return item_ref_html(text, context.get(CONTEXT_NAME))
    url = source_url(text)
    if url is None or not may_open(_viewer(context), url):
        return format_html('<span class="mono source-id">{}</span>', text)
    return format_html('<a class="mono source-id" href="{}">{}</a>', url, text)
