from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """No models: the shell only wires the apps together and shows the dashboard."""

    name = "console"
    verbose_name = "console shell"
