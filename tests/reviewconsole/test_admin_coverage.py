"""Every model of the product has a place in the Django admin (registered or inline)."""

from __future__ import annotations

from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import RequestFactory

from experience.cases.models import Case, Skill
from reviewconsole.models import Event

APPS = (
    "reviewconsole",
    "knowledge",
    "experience",
    "curation",
    "evaluation",
    "agentapi",
    "investigations",
)


def test_every_model_is_in_the_admin() -> None:
    inline_models = {
        inline.model
        for model_admin in admin.site._registry.values()
        for inline in model_admin.inlines
    }
    missing = [
        model._meta.label
        for app in APPS
        for model in apps.get_app_config(app).get_models()
        if model not in admin.site._registry and model not in inline_models
    ]
    assert missing == []


def test_hashed_content_and_events_are_read_only(admin_user: User) -> None:
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    for model in (Case, Skill, Event):
        model_admin = admin.site._registry[model]
        assert not model_admin.has_add_permission(request)
        assert not model_admin.has_change_permission(request)
        assert not model_admin.has_delete_permission(request)
