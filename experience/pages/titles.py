"""The titles of cases, skills, lessons and knowledge documents, for ``reviewconsole.itemrefs``.

Registered at start-up (``ExperienceConfig.ready``): each resolver answers a batch of ids of its
kind in one query, without the items of tenants the user may not see.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import Model

from experience.cases.models import Case, Skill
from experience.lessons.models import Lesson
from knowledge.models import Document
from reviewconsole import itemids
from reviewconsole.itemids import ItemId
from reviewconsole.itemrefs import TitleResolver, title_resolver_register
from reviewconsole.tenancy import visible

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User


def _reviewed_titles(model: type[Model]) -> TitleResolver:
    def resolve(items: list[ItemId], user: User | AnonymousUser | None) -> dict[ItemId, str]:
        by_text = {str(item): item for item in items}
        rows = visible(model._default_manager.filter(pk__in=sorted(by_text)), user)
        return {by_text[pk]: title for pk, title in rows.values_list("pk", "title")}

    return resolve


def document_titles(items: list[ItemId], user: User | AnonymousUser | None) -> dict[ItemId, str]:
    wanted = {item.key_version: item for item in items}
    rows = visible(Document.objects.filter(doc_key__in=sorted({k for k, _ in wanted})), user)
    titles: dict[ItemId, str] = {}
    for key, version, title in rows.values_list("doc_key", "version", "title"):
        item = wanted.get((key, version))
        if item is not None:
            titles[item] = title
    return titles


def title_resolvers_install() -> None:
    title_resolver_register(itemids.CASE, _reviewed_titles(Case))
    title_resolver_register(itemids.SKILL, _reviewed_titles(Skill))
    title_resolver_register(itemids.LESSON, _reviewed_titles(Lesson))
    title_resolver_register(itemids.DOCUMENT, document_titles)
