from __future__ import annotations

from django.apps import AppConfig


class SemanticConfig(AppConfig):
    name = "semantic"
    verbose_name = "Semantic index"
