"""Rules every template under templates/ keeps, checked on the source text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
PAGES = sorted(TEMPLATES.rglob("*.html"))
BASE = TEMPLATES / "_base.html"


def _source(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _name(path: Path) -> str:
    return str(path.relative_to(TEMPLATES))


def test_templates_are_found() -> None:
    assert BASE in PAGES
    assert len(PAGES) > 20


@pytest.mark.parametrize("path", PAGES, ids=_name)
def test_only_the_base_template_writes_head_tags(path: Path) -> None:
    # The stylesheet, scripts, meta and title come from the head block of _base.html; a page
    # adds to it through {% block extra_head %}, never with tags of its own in its content.
    if path == BASE:
        return
    source = _source(path)
    for tag in ("<link", "<script", "<meta", "<title", "<style"):
        assert tag not in source, f"{_name(path)} writes {tag}>"


@pytest.mark.parametrize("path", PAGES, ids=_name)
def test_no_template_links_a_second_stylesheet(path: Path) -> None:
    stylesheets = re.findall(r"\{% static '([^']+\.css)' %\}", _source(path))
    assert set(stylesheets) <= {"console/console.css"}
    assert "curation.css" not in _source(path)
    assert "curation.js" not in _source(path)


def test_the_base_template_loads_the_one_stylesheet_and_script() -> None:
    source = _source(BASE)
    assert "{% block head %}" in source
    assert "{% block extra_head %}" in source
    assert source.count('rel="stylesheet"') == 1
    assert "{% static 'console/console.css' %}" in source
    assert "{% static 'console/console.js' %}" in source


@pytest.mark.parametrize("path", PAGES, ids=_name)
def test_no_inline_style_or_script(path: Path) -> None:
    # The CSP allows styles and scripts from files only.
    source = _source(path)
    assert not re.search(r"\sstyle=", source), _name(path)
    assert not re.search(r"\son[a-z]+=\"", source), _name(path)


LIST_PAGES = [
    "knowledge/document_list.html",
    "experience/queue_list.html",
    "experience/run_list.html",
    "reviewconsole/event_list.html",
    "curation/rereview_list.html",
    "curation/proposal_list.html",
    "curation/nearduplicate_list.html",
]


@pytest.mark.parametrize("name", LIST_PAGES)
def test_list_pages_share_the_filter_form(name: str) -> None:
    source = _source(TEMPLATES / name)
    assert '{% include "_forms.html#filter-form"' in source
    assert '<form class="panel filters"' not in source


def test_the_filter_form_renders_fields_errors_submit_and_reset() -> None:
    from django import forms
    from django.template.loader import render_to_string

    class Filters(forms.Form):
        status = forms.ChoiceField(label="Status", choices=[("", "Any"), ("open", "Open")])
        title = forms.CharField(label="Title", required=False, help_text="Part of the title")

    form = Filters({"status": "nope"})
    html = render_to_string(
        "_forms.html#filter-form", {"form": form, "action": "/list/", "target": "list-results"}
    )
    assert 'action="/list/"' in html
    assert 'hx-get="/list/"' in html
    assert 'hx-target="#list-results"' in html
    assert 'hx-trigger="submit, input delay:400ms"' in html
    # A required field carries its mark (and says so to a screen reader).
    assert '<label for="id_status">Status <span class="required-mark"' in html
    assert '<label for="id_title">Title</label>' in html
    assert '<span class="help" id="id_title_helptext">Part of the title</span>' in html
    assert 'aria-describedby="id_title_helptext"' in html
    assert 'class="errorlist' in html
    assert '<button type="submit">' in html
    assert '<a href="/list/">' in html

    html = render_to_string(
        "_forms.html#filter-form",
        {"form": Filters(), "action": "/list/", "target": "t", "trigger": "change, submit"},
    )
    assert 'hx-trigger="change, submit"' in html
    assert "errorlist" not in html


@pytest.mark.parametrize("path", PAGES, ids=_name)
def test_no_template_cuts_an_id(path: Path) -> None:
    # URLs come from get_absolute_url or an item's digest, short ids from the short_id filter:
    # no template knows how long a prefix is or where to cut.
    source = _source(path)
    assert not re.search(r"\|\s*slice\b", source), _name(path)
    assert not re.search(r"id\s*\|\s*truncatechars", source), _name(path)


@pytest.mark.parametrize("path", PAGES, ids=_name)
def test_every_input_names_its_type(path: Path) -> None:
    # The stylesheet styles inputs by type: one written without it rendered as the browser's
    # bare box (the lesson conflict's "Scene tags" field, 21 px high).
    untyped = [tag for tag in re.findall(r"<input\b[^>]*>", _source(path)) if "type=" not in tag]
    assert untyped == [], f"{_name(path)}: {untyped}"
