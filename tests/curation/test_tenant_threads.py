"""Thread ids are per tenant (issue 23, item 2): two tenants import the same thread id."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from curation.models import Thread
from curation.threads import THREAD_CONFLICT, thread_import
from reviewconsole.errors import ValidationFailure
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.curation.conftest import thread_json

pytestmark = pytest.mark.django_db

A = settings.DEMO_TENANT
B = "riverside"


def thread_of(tenant: str, title: str) -> dict[str, Any]:
    data = thread_json()
    data.update(tenant=tenant, title=title)
    return data


def client_for(user: User) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


@pytest.fixture
def bob(db: None) -> User:
    return user_set_role(username="bob", role=Role.OPERATOR, tenants=[B])


@pytest.fixture
def a_thread(operator: User) -> Thread:
    thread, _ = thread_import(data=thread_of(A, "甲方线程"), actor=operator)
    return thread


def test_b_importing_a_thread_id_only_a_has_creates_its_own(a_thread: Thread, bob: User) -> None:
    thread, created = thread_import(data=thread_of(B, "乙方线程"), actor=bob)
    assert created and thread.tenant == B and thread.thread_id == a_thread.thread_id

    again, created_again = thread_import(data=thread_of(B, "乙方线程"), actor=bob)
    assert again.pk == thread.pk and not created_again

    with pytest.raises(ValidationFailure) as failure:
        thread_import(data=thread_of(B, "乙方线程改"), actor=bob)
    assert THREAD_CONFLICT in failure.value.message


def test_b_sees_its_own_thread_and_never_as(a_thread: Thread, bob: User) -> None:
    client = client_for(bob)
    thread_id = a_thread.thread_id
    assert client.get(f"/curation/threads/{thread_id}/").status_code == 404
    assert client.get(f"/curation/tenants/{A}/threads/{thread_id}/").status_code == 404

    thread_import(data=thread_of(B, "乙方线程"), actor=bob)
    page = client.get(f"/curation/threads/{thread_id}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "乙方线程" in html and "甲方线程" not in html


def test_a_deployment_wide_user_chooses_the_threads_tenant(
    a_thread: Thread, bob: User, operator: User
) -> None:
    b_thread, _ = thread_import(data=thread_of(B, "乙方线程"), actor=bob)
    client = client_for(operator)
    choice = client.get(f"/curation/threads/{a_thread.thread_id}/").content.decode()
    assert a_thread.get_absolute_url() in choice and b_thread.get_absolute_url() in choice
    page = client.get(b_thread.get_absolute_url())
    assert page.status_code == 200 and "乙方线程" in page.content.decode()
