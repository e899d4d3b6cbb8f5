"""Link-like text in a notification mail is defused (issue 37, item 7): whatever a mail program
could turn into a link — a scheme, a bare domain, ``www.``, an IP address, a UNC path, in
full-width or other compatibility forms, punycode — is written so that it no longer is one, even
after the reader's side normalises it (NFKC). Text with nothing link-like passes unchanged."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from curation.mail_text import CLOSE_QUOTE, OPEN_QUOTE, quoted

# What a generous linkifier could still read as a link, checked on the text as NFKC leaves it
# and with the ideographic full stop read as a dot between ASCII labels, as IDNA would.
# Written per character class, not per domain grammar, so it is broader than the code it checks.
LINK_LIKE = [
    re.compile(r"(?i)[a-z][a-z0-9+.\-]*:[/\\]"),  # a scheme: http://, http:/, file:\\
    re.compile(
        r"(?i)(?<![a-z0-9])(mailto|tel|sms|callto|skype|sip|xmpp|javascript|data|file|news"
        r"|http|https|ftp):"
    ),
    re.compile(r"\\\\[^\W_]"),  # a UNC path
    re.compile(r"(?i)www\d*\.[^\W_]"),
    re.compile(r"[^\W_]\.[^\W\d_]{2}"),  # a dot between a label and a top-level domain
    re.compile(r"[^\W_]\.xn--", re.IGNORECASE),  # a punycode label
    re.compile(r"\d\.\d+\.\d+\.\d"),  # an IPv4 address
]


def as_read(text: str) -> str:
    normal = unicodedata.normalize("NFKC", text)
    return re.sub(r"(?<=[A-Za-z0-9])\u3002(?=[A-Za-z0-9])", ".", normal)


def link_like(text: str) -> list[str]:
    read = as_read(text)
    return [match.group(0) for pattern in LINK_LIKE for match in pattern.finditer(read)]


# The forms of the reproduction, each in a revocation's title and reason.
REPORTED = ["evil-login.com/reset", "\\\\evil.test\\share", "ｗｗｗ．evil.test"]


@pytest.mark.parametrize("text", REPORTED)
def test_the_reported_forms_are_defused(text: str) -> None:
    assert link_like(text)  # the check sees them as links
    assert link_like(quoted(f"sign in at {text} now")) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("evil-login.com/reset", "“evil-login[.]com/reset”"),
        ("\\\\evil.test\\share", "“[\\][\\]evil[.]test\\share”"),
        ("ｗｗｗ．evil.test", "“ｗｗｗ[.]evil[.]test”"),
        ("ｈｔｔｐｓ：／／evil．test", "“ｈｔｔｐｓ[:]／／evil[.]test”"),
        ("evil。com", "“evil[.]com”"),
        ("10.0.0.1/admin", "“10[.]0[.]0[.]1/admin”"),
        ("xn--80ak6aa92e.xn--p1ai", "“xn--80ak6aa92e[.]xn--p1ai”"),
        ("пример.рф", "“пример[.]рф”"),
        ("javascript:alert(1)", "“javascript[:]alert(1)”"),
        ("a@evil.test", "“a@evil[.]test”"),
    ],
)
def test_how_a_link_like_form_is_written(text: str, expected: str) -> None:
    assert quoted(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "优惠券用不了。明天再说",  # the ideographic full stop ends a sentence, not a domain
        "version 1.2 of the recipe, e.g. store 3",
        "reason: wrong store",
        "50% off: two teas",
    ],
)
def test_text_that_is_not_link_like_is_left_alone(text: str) -> None:
    assert quoted(text) == f"{OPEN_QUOTE}{text}{CLOSE_QUOTE}"


# Generated link-like forms: a host of labels (ASCII, punycode, Cyrillic), written plain, in
# full-width, or with a compatibility dot, after a scheme, as www., bare with a path, as a UNC
# path, as an IPv4 address; between words that are not link-like themselves.

LABEL = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,8}[a-z0-9]", fullmatch=True),
    st.from_regex(r"xn--[a-z0-9]{2,8}", fullmatch=True),
    st.sampled_from(["пример", "evil-login", "example"]),
)
TLD = st.sampled_from(["com", "test", "zip", "login", "io", "рф", "xn--p1ai", "example"])
DOT = st.sampled_from([".", "．", "。", "｡"])
FULL_WIDTH = {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}


@st.composite
def host(draw: st.DrawFn) -> str:
    labels = draw(st.lists(LABEL, min_size=1, max_size=3))
    dot = draw(DOT)
    tld = draw(TLD)
    if dot in "。｡" and not all(label.isascii() for label in [*labels, tld]):
        dot = "."  # an ideographic full stop counts as a dot between ASCII labels only
    return dot.join([*labels, tld])


@st.composite
def ipv4(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.integers(0, 255), min_size=4, max_size=4))
    return draw(DOT.filter(lambda d: d in ".．")).join(str(p) for p in parts)


@st.composite
def link(draw: st.DrawFn) -> str:
    where = draw(st.one_of(host(), ipv4()))
    path = draw(st.sampled_from(["", "/reset", "/login?next=/", ":8443/x", "\\share"]))
    form = draw(st.sampled_from(["scheme", "www", "bare", "unc", "email", "scheme-less"]))
    scheme = draw(st.sampled_from(["http", "https", "ftp", "file", "HTTPS", "ms-word:ofe|u|http"]))
    written = {
        "scheme": f"{scheme}://{where}{path}",
        "scheme-less": f"{scheme}:{where}{path}",
        "www": f"www.{where}{path}",
        "bare": f"{where}{path or '/'}",
        "unc": f"\\\\{where}\\share",
        "email": f"someone@{where}",
    }[form]
    if draw(st.booleans()):
        chosen = draw(st.sets(st.integers(0, len(written) - 1)))
        written = "".join(
            FULL_WIDTH.get(ch, ch) if i in chosen else ch for i, ch in enumerate(written)
        )
    return written


WORDS = st.text(
    alphabet=st.sampled_from([*"abcdefghij 优惠券用不了，！?()-'\"“”", "\n", "\t"]),
    max_size=20,
)


@given(before=WORDS, found=link(), after=WORDS)
@example(before="go to ", found="evil-login.com/reset", after="")
@example(before="", found="\\\\evil.test\\share", after=" now")
@example(before="", found="ｗｗｗ．evil.test", after="")
def test_no_link_like_form_survives(before: str, found: str, after: str) -> None:
    assert link_like(found), found  # the generated form is link-like to begin with
    shown = quoted(before + found + after, limit=10_000)
    assert link_like(shown) == [], shown


@given(before=WORDS, found=link(), after=WORDS)
def test_no_link_like_form_survives_the_cut(before: str, found: str, after: str) -> None:
    shown = quoted(before + found + after, limit=12)
    assert link_like(shown) == [], shown


@given(text=WORDS)
def test_text_with_nothing_link_like_is_only_quoted(text: str) -> None:
    one_line = " ".join(text.split()).replace(OPEN_QUOTE, '"').replace(CLOSE_QUOTE, '"')
    assert quoted(text, limit=10_000) == f"{OPEN_QUOTE}{one_line}{CLOSE_QUOTE}"


PUNCTUATED = st.text(alphabet=st.sampled_from([*"abcdefgh0123 优惠。.,:/-@"]), max_size=30)


@given(text=PUNCTUATED)
@example(text="e.g. a: 3.5, a.b")
def test_punctuation_that_is_not_link_like_is_left_alone(text: str) -> None:
    assume(not link_like(text))
    one_line = " ".join(text.split())
    assert quoted(text, limit=10_000) == f"{OPEN_QUOTE}{one_line}{CLOSE_QUOTE}"


@pytest.mark.parametrize(
    ("text", "defused_tail"),
    [
        # A label past DNS's 63 characters, a scheme past 32, a host past 127 labels: each is
        # still found (a suffix of it is link-like) and its dot or colon bracketed.
        ("x" * 100_000 + " at evil.com", "evil[.]com"),
        ("a" * 70 + ".com/reset", "a[.]com/reset"),
        ("s" * 40 + "://host", "s[:]//host"),
        ("a." * 200 + "com", "a[.]a[.]com"),
    ],
)
def test_long_runs_are_defused_in_one_pass(text: str, defused_tail: str) -> None:
    # These lengths took minutes when every start of a long run was scanned to its end (a
    # 100,000-character revocation reason reached the mail); the scan is now bounded per start.
    shown = quoted(text, limit=len(text) * 2)
    assert shown.endswith(defused_tail + CLOSE_QUOTE), shown[-40:]
    # The oracle's own patterns scan to the end of a run: they read the tail, where the link is.
    assert link_like(shown[-300:]) == [], shown[-40:]
