from __future__ import annotations

from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"

    def ready(self) -> None:
        from knowledge.models import Document
        from knowledge.vectors import SPACE
        from reviewconsole.audit import audited_models_register
        from semantic.spaces import space_register

        # Every document version is written by a service that records knowledge.document.create.
        audited_models_register(Document)

        # The search index keeps vectors of its entries (the vector branch of search_knowledge).
        space_register(SPACE)
