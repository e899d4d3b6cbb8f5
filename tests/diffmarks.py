"""Reading word-level differences back out of a page (``templates/_word_diff.html``)."""

from __future__ import annotations

import re

_MARK = re.compile(r"<(ins|del)>(.*?)</\1>", re.DOTALL)
_HIDDEN = re.compile(r'<span class="visually-hidden">(.*?)</span>', re.DOTALL)


def marks(html: str) -> list[tuple[str, str]]:
    """Each ``<ins>`` and ``<del>`` of ``html`` in order, as (tag, visible text)."""
    return [(tag, _HIDDEN.sub("", inner)) for tag, inner in _MARK.findall(html)]


def labels(html: str) -> list[str]:
    """What a screen reader hears at the start of each mark (``[added in v2: ``)."""
    return [_HIDDEN.findall(inner)[0] for _tag, inner in _MARK.findall(html) if "hidden" in inner]


def section(html: str, start: str, end: str = "</dd>") -> str:
    """The part of ``html`` from ``start`` to the next ``end``."""
    return html.split(start, 1)[1].split(end, 1)[0]


_TAG = re.compile(r"<[^>]+>")


def _text(html: str, dropped: str) -> str:
    html = re.sub(rf"<{dropped}>.*?</{dropped}>", "", _HIDDEN.sub("", html), flags=re.DOTALL)
    return _TAG.sub("", html)


def old_text(html: str) -> str:
    """The older text a marked field shows: its kept and deleted words."""
    return _text(html, "ins")


def new_text(html: str) -> str:
    """The newer text a marked field shows: its kept and inserted words."""
    return _text(html, "del")
