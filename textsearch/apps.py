from __future__ import annotations

from django.apps import AppConfig
from django.conf import settings


class TextSearchConfig(AppConfig):
    """The text-search engine both indexes are built on; no tables of its own (its models are
    abstract: the apps' indexes are their concrete models)."""

    name = "textsearch"
    verbose_name = "Text search"

    def ready(self) -> None:
        # Before any fork (gunicorn --preload): the workers inherit the allocator's settings.
        from textsearch.memory import keep_freed_memory

        keep_freed_memory(getattr(settings, "SEARCH_FREED_MEMORY_KEPT", 0))
