from __future__ import annotations

from django.apps import AppConfig


class ReviewConsoleConfig(AppConfig):
    name = "reviewconsole"

    def ready(self) -> None:
        from django.contrib.auth.models import User

        from reviewconsole.audit import audited_models_register

        # Every role is given by user_set_role, which records auth.user.role_set.
        audited_models_register(User.groups.through)

        from reviewconsole.models import ChangeRequest, ReviewComment, ReviewThread

        # Every change request, thread and comment is written with its audit event
        # (reviewconsole/conversations.py).
        audited_models_register(ChangeRequest, ReviewThread, ReviewComment)

        from reviewconsole.display import connect_unshowable_markers

        # Every model: a stored datetime without a local time is shown in UTC, never a 500.
        connect_unshowable_markers()
