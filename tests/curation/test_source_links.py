"""Evidence sources that point to a thread message open that message in the thread view."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.template import Context, Template
from django.test import Client
from django.urls import reverse

from curation.models import Thread
from reviewconsole.links import source_url

pytestmark = pytest.mark.django_db


def _render(source: str) -> str:
    return Template("{% load ids %}{% source_ref source %}").render(Context({"source": source}))


def test_a_message_source_opens_the_message_highlighted_in_its_thread(
    thread: Thread, reviewer: User, client: Client
) -> None:
    message = thread.messages.order_by("id").first()
    assert message is not None
    source = f"thread:{thread.thread_id}#{message.message_id}"
    url = source_url(source)
    assert (
        url
        == reverse("curation:thread-detail", args=[thread.thread_id]) + f"#msg-{message.message_id}"
    )
    assert f'href="{url}"' in _render(source)
    client.force_login(reviewer)
    page, anchor = url.split("#")
    html = client.get(page).content.decode()
    assert re.search(rf'<li class="[^"]*" id="{anchor}">', html) or f'id="{anchor}"' in html
    css = (Path(settings.BASE_DIR) / "static" / "console" / "console.css").read_text("utf-8")
    assert ".thread-messages > li:target" in css  # the message opened is highlighted


def test_an_attachment_source_opens_its_message() -> None:
    assert source_url("thread:T-1#m3/attachment-1") == (
        reverse("curation:thread-detail", args=["T-1"]) + "#msg-m3"
    )


def test_a_run_source_opens_the_run() -> None:
    assert source_url("run:run-42#step-0") == reverse("experience:run-detail", args=["run-42"])


def test_a_thread_source_opens_the_thread() -> None:
    assert source_url("thread:T-1") == reverse("curation:thread-detail", args=["T-1"])


@pytest.mark.parametrize("text", ["report.pdf", "ticket 42", "thread:", "thread:#m3"])
def test_other_sources_show_as_text(text: str) -> None:
    assert source_url(text) is None
    assert "href" not in _render(text)
