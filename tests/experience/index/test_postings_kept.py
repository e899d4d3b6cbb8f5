"""Retrieval's posting lists kept per process by their row's version (PostgreSQL).

On PostgreSQL a retrieval sends the versions of the lists this process holds and receives only
the lists whose row changed (``textsearch.arrays.KeptLists``, as knowledge search does); SQLite
reads them in process memory and keeps none. Whatever is kept, a retrieval answers what it
answers with nothing kept: a changed list is read again, a list is never served for another
scope or tenant, and a revocation committed through another connection acts on the next query.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.db import connection, connections, transaction

from experience.cases.models import Case
from experience.core import domain
from experience.core.models import Status
from experience.index import postings
from experience.retrieval.pipeline import gated_cases
from experience.retrieval.service import ranked_items
from experience.review.lifecycle import status_followed
from knowledge.domain import sha256_hex
from reviewconsole.scopes import SCOPE_FIELDS
from tests.experience.conftest import NOW, SCOPE
from textsearch import arrays
from textsearch.delta import DELTAS

pytestmark = pytest.mark.django_db

OTHER_TENANT = {**SCOPE, "tenant": "other-tea"}
QUERY = "优惠券 无法使用 门店"


@pytest.fixture(autouse=True)
def nothing_kept() -> None:
    """Each test starts with this process holding no list (another test's rows are gone)."""
    arrays.POSTINGS.clear()
    arrays.CACHE.clear()


def approved(n: int, text: str, scope: dict[str, str], user: User) -> Case:
    """An approved case of ``scope``, indexed as a review decision indexes it (in its
    transaction)."""
    with transaction.atomic():
        case = Case.objects.create(
            id=f"case:{sha256_hex(['kept', n, text, scope['tenant']])}",
            **scope,
            title=text[:40],
            valid_from=NOW - timedelta(days=30),
            valid_to=NOW + timedelta(days=30),
            content_hash=sha256_hex(["kept", n]),
            content={"n": n},
            submitted_by=user,
            submitted_via="import",
            submitted_at=NOW - timedelta(days=40),
            status=Status.APPROVED,
            approved_by=user,
            approved_at=NOW - timedelta(days=1),
            incident=f"INC-{n}",
            search_text=text,
        )
        status_followed(case, now=NOW)
    return case


def revoke(case: Case) -> None:
    with transaction.atomic():
        case.status = Status.REVOKED
        case.save(update_fields=["status"])
        status_followed(case, now=NOW)


def retrieved(scope: dict[str, str]) -> list[str]:
    return [i for i, _kind, _title in ranked_items(QUERY, scope, NOW, {})]


def by_definition(scope: dict[str, str]) -> list[str]:
    """Every gated case's text ranked by ``rank_items``: what retrieval must answer."""
    texts = list(gated_cases(scope, NOW).values_list("id", "search_text"))
    return domain.rank_items(QUERY, texts, {})


def kept_keys() -> list[tuple[Any, ...]]:
    """The keys of the lists kept for retrieval (knowledge search's share the cache)."""
    keys = [key for key in arrays.POSTINGS if isinstance(key, tuple)]
    return [key for key in keys if key[0] == postings.INDEX_NAME]


@pytest.fixture
def corpus(operator: User) -> dict[str, list[Case]]:
    texts = ("优惠券 无法使用", "门店 优惠券", "打印机 断电", "优惠券 门店 小程序")
    return {
        "ours": [approved(n, text, SCOPE, operator) for n, text in enumerate(texts)],
        "theirs": [approved(10 + n, text, OTHER_TENANT, operator) for n, text in enumerate(texts)],
    }


def test_a_list_travels_once_per_row_version(corpus: dict[str, list[Case]]) -> None:
    """PostgreSQL: the next read of the same tokens uses the very arrays kept (none was sent
    again), each kept under its scope, beside the delta's it holds; SQLite keeps none."""
    first = postings.scope_read(SCOPE, QUERY)
    assert first is not postings.STALE
    if connection.vendor != "postgresql":
        assert kept_keys() == []
        return
    scope_key = (postings.INDEX_NAME, *(SCOPE[name] for name in SCOPE_FIELDS))
    assert kept_keys() and all(key[: len(scope_key)] == scope_key for key in kept_keys())
    again = postings.scope_read(SCOPE, QUERY)
    assert again is not postings.STALE
    assert len(again.raw) == len(first.raw) and len(again.expanded) == len(first.expanded)
    # The merged array's lists kept by version, and the lists of the delta's additions this
    # process holds on top of it (approvals since the scope was packed): none sent again.
    held = DELTAS.get(scope_key)
    kept_arrays = {id(arrays.POSTINGS[key][1]) for key in kept_keys()}
    if held is not None:
        kept_arrays |= {id(ids) for ids in [*held.raw.values(), *held.expanded.values()]}
    assert {id(ids) for ids in [*again.raw, *again.expanded]} <= kept_arrays
    assert retrieved(SCOPE) == by_definition(SCOPE) != []


def test_a_changed_list_is_read_again(corpus: dict[str, list[Case]], operator: User) -> None:
    """A new approval rewrites the lists of its tokens (a new row version): the next retrieval
    finds it, as it does a list kept under a version the row no longer has."""
    assert retrieved(SCOPE) == by_definition(SCOPE)
    newcomer = approved(99, "优惠券 无法使用 门店", SCOPE, operator)
    after = retrieved(SCOPE)
    assert newcomer.id in after
    assert after == by_definition(SCOPE)
    for key in kept_keys():
        version, _ids = arrays.POSTINGS[key]
        arrays.POSTINGS.keep(key, version + "-old", np.empty(0, dtype=np.int64))
    assert retrieved(SCOPE) == after


def test_another_tenant_never_reads_this_tenants_lists(corpus: dict[str, list[Case]]) -> None:
    """The same tokens in another tenant's scope are read for that scope: with this tenant's
    lists kept it answers only its own items, exactly as with nothing kept."""
    ours = {case.id for case in corpus["ours"]}
    assert set(retrieved(SCOPE)) <= ours
    warm = retrieved(OTHER_TENANT)
    assert warm and not set(warm) & ours
    arrays.POSTINGS.clear()
    arrays.CACHE.clear()
    assert retrieved(OTHER_TENANT) == warm == by_definition(OTHER_TENANT)
    assert set(retrieved(SCOPE)) <= ours


@pytest.mark.django_db(transaction=True)
def test_a_revocation_from_another_connection_acts_on_the_next_query(
    operator: User, make_user: Callable[[str, str], User]
) -> None:
    """A case revoked and committed through another connection (another thread: its own
    connection) is gone from this process's next retrieval, though its lists were kept."""
    cases = [
        approved(n, text, SCOPE, operator)
        for n, text in enumerate(("优惠券 无法使用", "门店 优惠券"))
    ]
    before = retrieved(SCOPE)
    assert cases[0].id in before
    if connection.vendor == "postgresql":
        assert kept_keys()
    failures: list[BaseException] = []

    def elsewhere() -> None:
        try:
            revoke(Case.objects.get(pk=cases[0].pk))
        except BaseException as error:  # reported by the test's thread
            failures.append(error)
        finally:
            connections.close_all()

    writer = threading.Thread(target=elsewhere)
    writer.start()
    writer.join()
    assert not failures
    after = retrieved(SCOPE)
    assert cases[0].id not in after
    assert after == by_definition(SCOPE) == [cases[1].id]
