from __future__ import annotations

from django.apps import AppConfig


class ReviewConsoleConfig(AppConfig):
    name = "reviewconsole"

    def ready(self) -> None:
        from reviewconsole.audit import connect_audit_guards

        connect_audit_guards()

        from reviewconsole.display import connect_unshowable_markers

        # Every model: a stored datetime without a local time is shown in UTC, never a 500.
        connect_unshowable_markers()
