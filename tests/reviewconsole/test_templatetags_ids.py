"""``short_id``: the one short form of an item id on the console's pages."""

from __future__ import annotations

import pytest
from django.template import Context, Template
from django.test import RequestFactory
from django.urls import reverse

from reviewconsole.itemids import ItemId
from reviewconsole.templatetags.ids import SHOWN_HEX, short_id

DIGEST = "0123456789abcdef" * 4


def _render(value: object) -> str:
    return Template("{% load ids %}{{ value|short_id }}").render(Context({"value": value}))


@pytest.mark.parametrize("kind", ["case", "skill"])
def test_a_content_named_id_shows_its_kind_and_twelve_hex_digits(kind: str) -> None:
    full = f"{kind}:{DIGEST}"
    assert _render(full) == (
        f'<span class="mono" title="{full}">{kind}:{DIGEST[:SHOWN_HEX]}…</span>'
    )
    assert SHOWN_HEX == 12


def test_an_item_id_object_shows_like_its_text() -> None:
    assert _render(ItemId.case(DIGEST)) == _render(f"case:{DIGEST}")


@pytest.mark.parametrize("text", ["doc:refund-window@3", "run-42", "case:not-hex"])
def test_other_ids_show_whole(text: str) -> None:
    assert _render(text) == f'<span class="mono" title="{text}">{text}</span>'


@pytest.mark.parametrize("value", [None, ""])
def test_no_id_shows_nothing(value: object) -> None:
    assert short_id(value) == ""


def test_the_id_is_escaped() -> None:
    html = _render('case:<b>"x"</b>')
    assert "<b>" not in html and "&lt;b&gt;" in html and "&quot;x&quot;" in html


def _render_for(user: object, template: str, **values: str) -> str:
    request = RequestFactory().get("/")
    request.user = user  # type: ignore[assignment]
    return Template("{% load ids %}" + template).render(Context({**values, "request": request}))


@pytest.mark.django_db
def test_a_source_or_run_links_only_for_a_viewer_who_may_open_its_page(
    reviewer: object, operator: object, admin_user: object
) -> None:
    thread = reverse("curation:thread-detail", args=["T-1"])
    run = reverse("experience:run-detail", args=["inv-1"])
    source = "{% source_ref value %}"
    # A thread page needs the case-building permissions an admin lacks; a run's page needs
    # the run permission an operator lacks: they see the text, never a link that answers 403.
    assert f'href="{thread}' in _render_for(reviewer, source, value="thread:T-1#m1")
    assert "href" not in _render_for(admin_user, source, value="thread:T-1#m1")
    assert f'href="{run}"' in _render_for(admin_user, source, value="run:inv-1#step-0")
    assert "href" not in _render_for(operator, source, value="run:inv-1#step-0")
    linked = "{% run_ref value url %}"
    assert f'href="{run}"' in _render_for(reviewer, linked, value="inv-1", url=run)
    assert "href" not in _render_for(operator, linked, value="inv-1", url=run)
