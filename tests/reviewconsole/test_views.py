"""The view toolkit's one home for what every app's views shared: the redirect after a write,
404 for what a selector did not find, and the tenant-checked case and skill lookups."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.http import Http404
from django.test import Client, RequestFactory
from django.urls import reverse
from django_htmx.middleware import HtmxDetails

from curation.views import home, incidents, proposals, rereview, similarity, threads
from experience.pages import cases, conflicts, items, lessons, queue, revocation, skills
from knowledge import views as knowledge_views
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from reviewconsole.views import HtmxHttpRequest, finish, or_404
from tests.ui.factories import SCOPE, approved_case, submit_case, submit_skill

OTHER = "other-co"


def posted(*, htmx: bool) -> HtmxHttpRequest:
    headers = {"HX-Request": "true"} if htmx else {}
    request = RequestFactory().post("/somewhere/", headers=headers)
    request.htmx = HtmxDetails(request)  # type: ignore[attr-defined]
    return request  # type: ignore[return-value]


def test_finish_redirects_a_form_post_with_see_other() -> None:
    response = finish(posted(htmx=False), "/done/")

    assert response.status_code == 303
    assert response["Location"] == "/done/"
    assert "HX-Redirect" not in response


def test_finish_tells_htmx_to_load_the_whole_page() -> None:
    response = finish(posted(htmx=True), "/done/")

    # An htmx request follows a 3xx itself and swaps the page into its target: not wanted here.
    assert response.status_code == 200
    assert response["HX-Redirect"] == "/done/"


def test_or_404_passes_what_was_found_and_refuses_nothing() -> None:
    assert or_404(0) == 0
    with pytest.raises(Http404):
        or_404(None)


def test_the_shared_helpers_have_no_copies_left_in_app_views() -> None:
    curation_views = (home, incidents, proposals, rereview, similarity, threads)
    experience_views = (cases, conflicts, items, lessons, queue, revocation, skills)
    for module in (*experience_views, *curation_views, knowledge_views):
        copies = ("item_url", "_finish", "_case_or_404", "_skill_or_404", "_document_url")
        assert [name for name in copies if name in vars(module) and name != "item_url"] == []
        if "item_url" in vars(module):
            assert module.item_url.__module__ == "reviewconsole.links"


@pytest.mark.django_db
def test_another_tenants_case_and_skill_are_404_on_every_page_that_looks_them_up(
    operator: User, reviewer: User
) -> None:
    foreign_scope = {**SCOPE, "tenant": OTHER}
    cases = [
        approved_case(
            submitter=operator, reviewer=reviewer, incident=f"INC-F{n}", scope=foreign_scope
        )
        for n in (1, 2)
    ]
    skill = submit_skill(operator, [c.id for c in cases], scope=foreign_scope)
    own = submit_case(operator, incident="INC-OWN")
    limited = user_set_role(username="lena", role=Role.REVIEWER, tenants=[SCOPE["tenant"]])
    client = Client()
    client.force_login(limited)

    case_pages = ("experience:case-detail", "experience:case-revoke", "curation:case-similar")
    skill_pages = ("experience:skill-detail", "experience:skill-revoke", "curation:skill-support")
    for name in case_pages:
        assert client.get(reverse(name, args=[cases[0].digest])).status_code == 404, name
        assert client.get(reverse(name, args=[own.digest])).status_code == 200, name
    for name in skill_pages:
        assert client.get(reverse(name, args=[skill.digest])).status_code == 404, name
    # A digest of no case at all answers the same.
    assert client.get(reverse("curation:case-similar", args=["0" * 64])).status_code == 404
