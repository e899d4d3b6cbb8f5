"""Item mentions show names, not hashes: title, kind, short id, link, full id on hover, copy."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.template import Context, Template
from django.test.utils import CaptureQueriesContext
from django.utils.html import strip_tags

from experience.cases.models import Case
from reviewconsole.itemrefs import item_titles
from reviewconsole.models import TenantMembership
from reviewconsole.tenancy import forget
from tests.experience.conftest import case_data

pytestmark = pytest.mark.django_db


def _render(value: object, titles: object = None) -> str:
    template = Template("{% load ids %}{% item_ref value %}")
    return template.render(Context({"value": value, "item_titles": titles}))


def test_a_case_shows_its_title_kind_short_id_link_and_copy_button(
    submit_case: Callable[..., Case], reviewer: User
) -> None:
    case = submit_case()
    html = _render(case.id, item_titles([case.id], reviewer))
    assert f'<a href="/cases/{case.digest}/" title="{case.id}">' in html
    assert case_data()["title"] in html
    assert '<span class="item-kind">case</span>' in html
    assert f"case:{case.digest[:12]}…" in html
    assert case.id not in strip_tags(html)  # the full id only on hover and in the copy button
    assert f'data-copy="{case.id}"' in html


def test_a_part_after_the_id_stays_in_the_link(
    submit_case: Callable[..., Case], reviewer: User
) -> None:
    case = submit_case()
    html = _render(f"{case.id}#diagnosis", item_titles([f"{case.id}#diagnosis"], reviewer))
    assert f'href="/cases/{case.digest}/#diagnosis"' in html
    assert case_data()["title"] in html


def test_without_primed_titles_the_id_still_links_and_copies(
    submit_case: Callable[..., Case],
) -> None:
    case = submit_case()
    with CaptureQueriesContext(connection) as queries:
        html = _render(case.id)
    assert len(queries) == 0
    assert f'href="/cases/{case.digest}/"' in html and f'data-copy="{case.id}"' in html


@pytest.mark.parametrize("text", ["report.pdf", "free <b>text</b>"])
def test_text_naming_no_item_shows_escaped_as_it_is(text: str) -> None:
    html = _render(text)
    assert "<b>" not in html and "href" not in html and "copy-id" not in html


def test_another_tenants_item_shows_no_title(
    submit_case: Callable[..., Case], make_user: Callable[[str, str], User]
) -> None:
    case = submit_case()
    outsider = make_user("outsider", "reviewer")
    TenantMembership.objects.create(user=outsider, tenant="another-tenant")
    forget(outsider)
    html = _render(case.id, item_titles([case.id], outsider))
    assert case_data()["title"] not in html


def test_titles_of_many_items_cost_one_query_per_kind(
    submit_case: Callable[..., Case], reviewer: User
) -> None:
    cases = [submit_case(case_data(incident=f"INC-{n}", title=f"title {n}")) for n in range(4)]
    documents = ["doc:refund-window@1", "doc:refund-window@2"]
    with CaptureQueriesContext(connection) as one:
        item_titles([cases[0].id, documents[0]], reviewer)
    with CaptureQueriesContext(connection) as many:
        titles = item_titles([c.id for c in cases] + documents + ["free text", None], reviewer)
    assert len(one) == len(many) == 2
    assert sorted(titles.title(c.id) or "" for c in cases) == [f"title {n}" for n in range(4)]


def test_a_title_the_page_already_has_is_shown_without_a_query(
    submit_case: Callable[..., Case],
) -> None:
    case = submit_case()
    template = Template('{% load ids %}{% item_ref value title="Known title" %}')
    with CaptureQueriesContext(connection) as queries:
        html = template.render(Context({"value": case.id}))
    assert len(queries) == 0
    assert f'title="{case.id}">Known title</a>' in html


def test_a_case_page_names_a_case_its_evidence_cites_by_title(
    submit_case: Callable[..., Case], reviewer: User
) -> None:
    from django.test import Client

    cited = submit_case(
        case_data(incident="INC-CITED", title="Earlier case: store list missing store 002")
    )
    citing = submit_case(
        case_data(
            incident="INC-CITING",
            observations=[{"source_id": cited.id, "excerpt": "Same refusal seen before."}],
        )
    )
    client = Client()
    client.force_login(reviewer)
    page = client.get(f"/cases/{citing.digest}/").content.decode()
    assert "Earlier case: store list missing store 002" in page
    assert f'href="/cases/{cited.digest}/"' in page
