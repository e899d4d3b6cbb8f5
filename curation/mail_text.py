"""How user text and links enter a notification mail. Pure: no Django imports.

Text a user wrote (titles, reasons) is shown as one quoted line of at most ``QUOTE_LIMIT``
characters, never as lines of its own, and anything in it a mail program would turn into a link
is written so that it will not (``http[:]//``, ``www[.]``): the only links in a mail are the
ones ``console_link`` builds from the console's configured address.
"""

from __future__ import annotations

import re
import unicodedata

QUOTE_LIMIT = 120
OPEN_QUOTE, CLOSE_QUOTE = "“", "”"

_SCHEME = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*):(//)")
_MAILTO = re.compile(r"(?i)\bmailto:")
_WWW = re.compile(r"(?i)\bwww\.")


def quoted(text: str, *, limit: int = QUOTE_LIMIT) -> str:
    """``text`` as one line between quotation marks: whitespace runs (line breaks included)
    become one space, control and format characters go, links are defused, and the result is
    cut to ``limit`` characters with an ellipsis."""
    one_line = " ".join(text.split())
    visible = "".join(ch for ch in one_line if unicodedata.category(ch)[0] != "C")
    unquoted = visible.replace(OPEN_QUOTE, '"').replace(CLOSE_QUOTE, '"')
    defused = _WWW.sub("www[.]", _MAILTO.sub("mailto[:]", _SCHEME.sub(r"\1[:]\2", unquoted)))
    if len(defused) > limit:
        defused = defused[: limit - 1].rstrip() + "…"
    return f"{OPEN_QUOTE}{defused}{CLOSE_QUOTE}"


def console_link(base_url: str, path: str) -> str:
    """The console's address ``base_url`` joined with a path of its own; "" when no address
    is configured or ``path`` is not a plain absolute path on it."""
    if not base_url or not path.startswith("/") or path.startswith("//"):
        return ""
    if any(ch.isspace() for ch in path):
        return ""
    return base_url.rstrip("/") + path
