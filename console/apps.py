from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """No models: the shell only wires the apps together and shows the dashboard."""

    name = "console"
    verbose_name = "console shell"

    def ready(self) -> None:
        from console.admin_names import admin_names_install
        from experience.pages.scope_options import scope_values
        from reviewconsole.formfields import scope_values_provider_install

        # Scope fields of every console form offer the documents' and cases' values the user
        # may see (the shared field partial, templates/_forms.html).
        scope_values_provider_install(scope_values)
        # The admin's app, model and column names in the reader's language.
        admin_names_install()
