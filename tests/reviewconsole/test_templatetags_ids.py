"""``short_id``: the one short form of an item id on the console's pages."""

from __future__ import annotations

import pytest
from django.template import Context, Template

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
