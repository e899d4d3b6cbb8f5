"""How user text and links enter a notification mail. Pure: no Django imports.

Text a user wrote (titles, reasons) is shown as one quoted line of at most ``QUOTE_LIMIT``
characters, never as lines of its own, and anything in it a mail program could turn into a link
is written so that it will not: the only links in a mail are the ones ``console_link`` builds from
the console's configured address.

Link-like forms are found in the text as a reader's side may normalise it (NFKC, so full-width
and other compatibility forms count as what they stand for; an ideographic full stop between
ASCII labels counts as a dot, as IDNA reads it), and defused in the text as written by bracketing
the character that makes them links: a scheme's colon (``http[:]//``, ``mailto[:]``), every dot
of a host name or IPv4 address (``evil-login[.]com/reset``, ``www[.]evil[.]test``,
``10[.]0[.]0[.]1``), the backslashes that open a UNC path (``[\\][\\]evil[.]test\\share``).
A host name is any run of labels whose last is a top-level domain in form (two letters or more, of
any script, or punycode): every such domain counts, known or not, so ``report.zip`` is defused
too. Text with nothing link-like is left as written.
"""

from __future__ import annotations

import re
import unicodedata

QUOTE_LIMIT = 120
OPEN_QUOTE, CLOSE_QUOTE = "“", "”"

# Over the normalised text. A match ending in a colon is a scheme (its colon is bracketed); in any
# other match every dot and backslash is. Every repetition is bounded (a label by DNS's 63
# characters, a host by its 127 labels, a scheme by 32 characters) or anchored at the start of its
# run, so the scan from each position reads a bounded window and a long run of letters or labels
# (a 100,000-character reason) costs linear time. A longer run still shows its link: a suffix of it
# matches, and that suffix holds the colon or the dots that are bracketed.
_LABEL = r"[^\W_](?:[\w-]{0,61}[^\W_])?"
_TLD = r"(?:xn--[a-z0-9-]{1,59}|[^\W\d_]{2,63})"
_LINK_LIKE = re.compile(
    "|".join(
        [
            # Any scheme followed by a slash or backslash: http://, http:/, file:\\.
            r"[a-z][a-z0-9+.\-]{0,31}:(?=[/\\])",
            # Schemes a mail program links without slashes.
            r"(?<![a-z0-9])(?:mailto|tel|sms|callto|skype|sip|xmpp|javascript|data|file|news|http|https|ftp):",
            # A UNC path: two backslashes or more before a name, matched from the run's first.
            r"(?<!\\)\\{2,}(?=[^\W_])",
            # www. before anything at all, and an IPv4 address, wherever they start.
            r"www\d{0,3}\.",
            r"\d{1,3}(?:\.\d{1,3}){3}",
            # A host name: labels ending in a top-level domain.
            _LABEL + r"(?:\." + _LABEL + r"){0,125}\." + _TLD,
        ]
    ),
    re.IGNORECASE,
)
_MARKED = {".": "[.]", ":": "[:]", "\\": "[\\]"}
# Read as a dot between ASCII labels (IDNA maps it so); elsewhere it ends a sentence.
_IDEOGRAPHIC_STOP = re.compile(r"(?<=[a-z0-9])\u3002(?=[a-z0-9])", re.IGNORECASE)


def defused(text: str) -> str:
    """``text`` with every link-like form in it written so that it is not one."""
    # The text as a reader may normalise it, character by character, so a match in it points
    # back at the characters written.
    forms = [unicodedata.normalize("NFKC", ch) for ch in text]
    normal = _IDEOGRAPHIC_STOP.sub(".", "".join(forms))
    marked: set[int] = set()
    for match in _LINK_LIKE.finditer(normal):
        if match.group(0).endswith(":"):
            marked.add(match.end() - 1)
        else:
            marked.update(k for k in range(match.start(), match.end()) if normal[k] in ".\\")
    if not marked:
        return text
    # A character written as is, unless its normal form holds a marked one: then that form,
    # with the marked characters bracketed.
    written = []
    start = 0
    for ch, form in zip(text, forms, strict=True):
        span = range(start, start + len(form))
        start = span.stop
        if marked.isdisjoint(span):
            written.append(ch)
        else:
            written.extend(_MARKED[normal[k]] if k in marked else normal[k] for k in span)
    return "".join(written)


def quoted(text: str, *, limit: int = QUOTE_LIMIT) -> str:
    """``text`` as one line between quotation marks: whitespace runs (line breaks included)
    become one space, control and format characters go, links are defused, and the result is
    cut to ``limit`` characters with an ellipsis."""
    one_line = " ".join(text.split())
    visible = "".join(ch for ch in one_line if unicodedata.category(ch)[0] != "C")
    unquoted = visible.replace(OPEN_QUOTE, '"').replace(CLOSE_QUOTE, '"')
    shown = defused(unquoted)
    if len(shown) > limit:
        shown = shown[: limit - 1].rstrip() + "…"
    return f"{OPEN_QUOTE}{shown}{CLOSE_QUOTE}"


def console_link(base_url: str, path: str) -> str:
    """The console's address ``base_url`` joined with a path of its own; "" when no address
    is configured or ``path`` is not a plain absolute path on it."""
    if not base_url or not path.startswith("/") or path.startswith("//"):
        return ""
    if any(ch.isspace() for ch in path):
        return ""
    return base_url.rstrip("/") + path
