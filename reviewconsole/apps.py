from __future__ import annotations

from django.apps import AppConfig


class ReviewConsoleConfig(AppConfig):
    name = "reviewconsole"

    def ready(self) -> None:
        from django.db.models.signals import post_init

        from reviewconsole.display import mark_unshowable

        # Every model: a stored datetime without a local time is shown in UTC, never a 500.
        post_init.connect(mark_unshowable, dispatch_uid="reviewconsole.mark_unshowable")
