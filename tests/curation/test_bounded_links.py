"""A cluster of near-identical cases: each new case is linked to a bounded number of its most
similar peers, so a bulk import writes rows in proportion to its size, not its square."""

from __future__ import annotations

from datetime import datetime

import pytest
from django.contrib.auth.models import User
from django.db.models import Count

from curation.incidents import NEAR_DUPLICATE_LINKS
from curation.models import NearDuplicate
from experience.services import items_import
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
