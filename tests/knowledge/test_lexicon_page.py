"""The lexicon page: operators add, change and remove terms (audited); others only read."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.urls import reverse

from knowledge.models import Synonym
from reviewconsole.models import Event
from tests.ui.conftest import csrf_client, csrf_token

URL = "/knowledge/lexicon/"


def post(client: Any, **data: str) -> Any:
    return client.post(URL, {**data, "csrfmiddlewaretoken": csrf_token(client)})


def test_an_operator_adds_a_bilingual_pair_and_it_is_audited_and_shown(operator: User) -> None:
    client = csrf_client(operator)

    answer = post(client, action="set", term="member price", canonical="会员价")

    assert answer.status_code == 303
    assert Synonym.objects.get(term="member price").canonical == "会员价"
    event = Event.objects.filter(target="synonym:member price").latest("pk")
    assert event.actor == operator
    page = client.get(URL).content.decode()
    assert "member price" in page and "会员价" in page


def test_a_pair_across_languages_is_marked_as_both_languages(operator: User) -> None:
    client = csrf_client(operator)
    post(client, action="set", term="member price", canonical="会员价")

    page = client.get(URL, {"q": "会员价"}).content.decode()

    table = page[page.index("<tbody>") :]
    row = table[table.index("会员价") :].split("</tr>")[0]
    assert "both languages" in row


def test_an_operator_removes_a_term(operator: User) -> None:
    client = csrf_client(operator)
    post(client, action="set", term="member price", canonical="会员价")

    answer = post(client, action="remove", term="member price")

    assert answer.status_code == 303
    assert not Synonym.objects.filter(term="member price").exists()
    assert Event.objects.filter(target="synonym:member price").count() == 2


def test_bad_input_names_the_field_and_writes_nothing(operator: User) -> None:
    client = csrf_client(operator)
    before = Synonym.objects.count()

    same = post(client, action="set", term="券", canonical="券")
    missing = post(client, action="remove", term="no such term")

    assert same.status_code == 422
    assert "must differ from the term" in same.content.decode()
    assert missing.status_code == 422
    assert Synonym.objects.count() == before


def test_an_admin_reads_the_lexicon_but_cannot_change_it(admin_user: User) -> None:
    client = csrf_client(admin_user)

    page = client.get(URL)
    refused = post(client, action="set", term="member price", canonical="会员价")
    removal = post(client, action="remove", term="coupon")

    assert page.status_code == 200
    assert 'name="canonical"' not in page.content.decode()
    assert refused.status_code == 403 and removal.status_code == 403
    assert not Synonym.objects.filter(term="member price").exists()
    assert Synonym.objects.filter(term="coupon").exists()


def test_the_lexicon_is_linked_from_the_documents_and_the_search_preview(operator: User) -> None:
    client = csrf_client(operator)

    for page in ("knowledge:document-list", "knowledge:search-preview"):
        assert URL in client.get(reverse(page)).content.decode()
