"""Near-duplicate links and incident merges stay inside one tenant: similar cases of two tenants
are never linked, and a link across tenants (a row stored before that rule) never merges
incidents or records a decision, through the service or the console."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db.models import F
from django.test import Client
from django.urls import reverse

from curation import incidents
from curation.models import IncidentMerge, LinkStatus, NearDuplicate
from experience.cases.models import Case
from reviewconsole.errors import PermissionRefused, ValidationFailure
from reviewconsole.models import Action, Event
from reviewconsole.roles import Role
from reviewconsole.services import user_set_role
from tests.curation.conftest import other_wording, unrelated
from tests.experience.conftest import NOW, SCOPE, case_data

OWN = SCOPE["tenant"]
OTHER = "other-co"
OTHER_SCOPE = {**SCOPE, "tenant": OTHER}


@pytest.fixture
def limited_reviewer(db: None) -> User:
    return user_set_role(username="lena", role=Role.REVIEWER, tenants=[OWN])


@pytest.fixture
def pair(approve: Callable[..., Case]) -> tuple[Case, Case]:
    """Two similar approved cases of distinct incidents, one in each tenant."""
    return (
        approve(case_data(incident="INC-1")),
        approve(other_wording("INC-X2", scope=dict(OTHER_SCOPE))),
    )


@pytest.fixture
def cross_link(pair: tuple[Case, Case]) -> NearDuplicate:
    """A link between the two tenants' cases, the own tenant's case first."""
    own, foreign = pair
    return NearDuplicate.objects.create(case_a=own, case_b=foreign, similarity=0.9, detected_at=NOW)


def nothing_merged(link: NearDuplicate) -> None:
    link.refresh_from_db()
    assert link.status == LinkStatus.OPEN and link.resolved_by is None
    assert not IncidentMerge.objects.exists()
    assert not Event.objects.filter(
        action__in=[Action.INCIDENT_MERGE, Action.NEAR_DUPLICATE_RESOLVE]
    ).exists()


def test_similar_cases_of_two_tenants_are_never_linked(
    pair: tuple[Case, Case], approve: Callable[..., Case]
) -> None:
    # The same wording again in each tenant: linked within the tenant, never across.
    approve(other_wording("INC-2"))
    approve(case_data(incident="INC-X1", scope=dict(OTHER_SCOPE)))
    links = NearDuplicate.objects.all()
    assert {link.case_a.tenant for link in links} == {OWN, OTHER}
    assert not links.exclude(case_a__tenant=F("case_b__tenant")).exists()


@pytest.mark.parametrize(
    ("decision", "canonical"), [(incidents.SAME_INCIDENT, "INC-1"), (incidents.DIFFERENT, "")]
)
def test_a_link_across_tenants_is_never_resolved(
    cross_link: NearDuplicate, second_reviewer: User, decision: str, canonical: str
) -> None:
    # Not even by a deployment-wide reviewer: a merge would move the other tenant's incident
    # into this tenant's counts.
    with pytest.raises(ValidationFailure) as refused:
        incidents.near_duplicate_resolve(
            link=cross_link,
            decision=decision,
            canonical=canonical,
            actor=second_reviewer,
            reason="同一事故",
        )
    assert refused.value.field == "link"
    assert refused.value.message == incidents.LINK_ACROSS_TENANTS
    nothing_merged(cross_link)


def test_a_limited_reviewer_is_refused_a_link_reaching_another_tenant(
    cross_link: NearDuplicate, limited_reviewer: User
) -> None:
    with pytest.raises((ValidationFailure, PermissionRefused)):
        incidents.near_duplicate_resolve(
            link=cross_link,
            decision=incidents.SAME_INCIDENT,
            canonical="INC-1",
            actor=limited_reviewer,
            reason="同一事故",
        )
    nothing_merged(cross_link)


def test_the_console_never_resolves_a_link_across_tenants(
    cross_link: NearDuplicate, limited_reviewer: User
) -> None:
    client = Client()
    client.force_login(limited_reviewer)
    response = client.post(
        reverse("curation:link-resolve", args=[cross_link.pk]),
        {"decision": incidents.SAME_INCIDENT, "canonical": "INC-X2", "reason": "同一事故"},
    )
    assert response.status_code in (303, 404)
    nothing_merged(cross_link)


def test_an_incident_merge_never_records_another_tenants_link(
    pair: tuple[Case, Case], approve: Callable[..., Case], second_reviewer: User
) -> None:
    foreign_link = NearDuplicate.objects.create(
        case_a=pair[1],
        case_b=approve(unrelated("INC-X3", scope=dict(OTHER_SCOPE))),
        similarity=0.9,
        detected_at=NOW,
    )
    with pytest.raises(ValidationFailure) as refused:
        incidents.incident_merge(
            tenant=OWN,
            brand=SCOPE["brand"],
            alias="INC-2",
            into="INC-1",
            actor=second_reviewer,
            reason="同一事故",
            link=foreign_link,
        )
    assert refused.value.field == "link"
    nothing_merged(foreign_link)


def test_incidents_are_merged_only_in_a_tenant_the_reviewer_belongs_to(
    pair: tuple[Case, Case], limited_reviewer: User
) -> None:
    with pytest.raises(PermissionRefused):
        incidents.incident_merge(
            tenant=OTHER,
            brand=SCOPE["brand"],
            alias="INC-X2",
            into="INC-X1",
            actor=limited_reviewer,
            reason="同一事故",
        )
    assert not IncidentMerge.objects.exists()
