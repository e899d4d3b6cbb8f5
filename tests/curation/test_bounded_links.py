"""A cluster of near-identical cases: each new case is linked to a bounded number of its most
similar peers, so a bulk import writes rows in proportion to its size, not its square."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.contrib.auth.models import User
from django.db.models import Count

from curation.incidents import NEAR_DUPLICATE_BUCKET, NEAR_DUPLICATE_LINKS
from curation.models import CaseBand, NearDuplicate
from experience.cases.models import Case
from experience.core.models import Status
from experience.review.imports import items_import
from tests.experience.conftest import case_data

pytestmark = pytest.mark.django_db


def test_each_new_case_links_to_at_most_the_bound(reviewer: User, at_now: datetime) -> None:
    n = NEAR_DUPLICATE_LINKS + 7
    items = [
        case_data(incident=f"INC-{i}", title=f"二号店优惠券无法使用：门店范围漏配 {i}")
        for i in range(n)
    ]
    submitted = items_import(items=items, actor=reviewer)
    ids = [item.id for item in submitted]
    assert NearDuplicate.objects.count() <= NEAR_DUPLICATE_LINKS * n
    # Links are made when the newer case arrives: each case links at most the bound of earlier ones.
    newer: dict[int, int] = {}
    for link in NearDuplicate.objects.all():
        later = max(ids.index(link.case_a_id), ids.index(link.case_b_id))
        newer[later] = newer.get(later, 0) + 1
    assert max(newer.values()) == NEAR_DUPLICATE_LINKS
    # Every case but the first is still linked into the cluster.
    linked = set(NearDuplicate.objects.values_list("case_a_id", flat=True)) | set(
        NearDuplicate.objects.values_list("case_b_id", flat=True)
    )
    assert linked == set(ids)
    assert (
        not NearDuplicate.objects.values("case_a", "case_b").annotate(n=Count("id")).filter(n__gt=1)
    )


def _cluster(start: int, n: int) -> list[dict[str, object]]:
    return [
        case_data(incident=f"INC-{i}", title=f"二号店优惠券无法使用：门店范围漏配 {i}")
        for i in range(start, start + n)
    ]


def test_band_buckets_stay_bounded_however_large_the_cluster(
    reviewer: User, at_now: datetime
) -> None:
    # Each new case reads the members of its band buckets: were the buckets to grow with the
    # cluster, each case would read the whole cluster and an import would cost its square.
    n = NEAR_DUPLICATE_BUCKET * 2 + 5
    submitted = items_import(items=_cluster(0, n), actor=reviewer)
    sizes = CaseBand.objects.values("key").annotate(n=Count("id"))
    assert sizes and max(row["n"] for row in sizes) == NEAR_DUPLICATE_BUCKET
    # The latest case still finds the cluster through its representatives.
    latest = submitted[-1].id
    assert (
        NearDuplicate.objects.filter(case_b_id=latest).count()
        + NearDuplicate.objects.filter(case_a_id=latest).count()
        == NEAR_DUPLICATE_LINKS
    )


def test_a_bucket_of_rejected_cases_takes_new_members(reviewer: User, at_now: datetime) -> None:
    items_import(items=_cluster(0, NEAR_DUPLICATE_BUCKET), actor=reviewer)
    Case.objects.update(status=Status.REJECTED)  # every representative leaves the queue
    first, second = items_import(items=_cluster(100, 2), actor=reviewer)
    (link,) = NearDuplicate.objects.filter(case_b_id__in=[first.id, second.id]) | (
        NearDuplicate.objects.filter(case_a_id__in=[first.id, second.id])
    )
    assert {link.case_a_id, link.case_b_id} == {first.id, second.id}
