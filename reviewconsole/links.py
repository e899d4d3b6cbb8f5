"""Console URLs of items named by id: audit targets, impact lists, evidence sources, citations."""

from __future__ import annotations

import re

from django.contrib.auth.models import AnonymousUser, User
from django.urls import NoReverseMatch, Resolver404, resolve, reverse

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


# Evidence sources (and audit targets) that are not items: a thread (``thread:ID``), one of its
# messages (``thread:ID#m3``) or attachments (``thread:ID#m3/attachment-1``), a run's step
# (``run:RUN#step-0``). The pages are
# named by URL name, like the item kinds', since the apps that own them are above this one.
THREAD_SOURCE = re.compile(r"thread:(?P<thread>[^#/\s]+)(?:#(?P<message>[^/\s]+)(?:/\S*)?)?")
RUN_SOURCE = re.compile(r"run:(?P<run>[^#\s]+)(?:#\S*)?")
THREAD_PAGE = "curation:thread-detail"
RUN_PAGE = "experience:run-detail"
# The anchor of a message on its thread's page.
MESSAGE_ANCHOR = "msg-{}"


def source_url(text: str) -> str | None:
    """The page an evidence source points to: an item's page, a thread's page opened at the
    message (its anchor), a run's page; None for anything else (a file, free text)."""
    url = item_url(text.split("#", 1)[0]) if not text.startswith(("thread:", "run:")) else None
    if url is not None:
        return url + (("#" + text.split("#", 1)[1]) if "#" in text else "")
    try:
        if match := THREAD_SOURCE.fullmatch(text):
            page = reverse(THREAD_PAGE, args=[match["thread"]])
            if match["message"] is None:
                return page
            return f"{page}#{MESSAGE_ANCHOR.format(match['message'])}"
        if match := RUN_SOURCE.fullmatch(text):
            return reverse(RUN_PAGE, args=[match["run"]])
    except NoReverseMatch:
        return None
    return None


def may_open(user: User | AnonymousUser | None, url: str) -> bool:
    """Whether ``user`` may open the console page at ``url``: what its view's ``console_view``
    asks (the one home of a page's permissions), so a page links only where the link opens."""
    if user is None:
        return True
    try:
        view = resolve(url.split("#", 1)[0]).func
    except Resolver404:
        return False
    needs = getattr(view, "console_permissions", None)
    return needs is None or (user.is_staff and user.has_perms(needs))
