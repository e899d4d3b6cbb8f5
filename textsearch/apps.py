from __future__ import annotations

from django.apps import AppConfig


class TextSearchConfig(AppConfig):
    """The text-search engine both indexes are built on; no tables of its own (its models are
    abstract: the apps' indexes are their concrete models)."""

    name = "textsearch"
    verbose_name = "Text search"
