"""Form pieces every console form shares: times typed in a named zone, scope values offered from
what exists.

- ``ZonedDateTimeField``: a ``datetime-local`` input read in the console's current time zone (the
  zone is named next to the field); a value that carries its own offset keeps it. Out comes an
  aware datetime within the dates the product accepts.
- ``ScopeSelect``: a filter's select of those values, for list pages.
- ``ScopeInput``: a text input with a ``<datalist>`` of the values the user may see (tenancy is
  the caller's: ``offer_values`` takes the values already filtered). Typing a new value stays
  possible: a datalist suggests, it never restricts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

from django import forms
from django.utils import timezone
from django.utils.functional import lazy
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext_lazy as _

from reviewconsole.errors import ValidationFailure
from reviewconsole.scopes import SCOPE_FIELDS
from reviewconsole.timeparse import check_bounds

LOCAL_FORMAT = "%Y-%m-%dT%H:%M"
NOT_A_TIME = _("is not a date and time")


def zone_name() -> str:
    return str(timezone.get_current_timezone_name())


def _zone_help() -> str:
    return str(_("Time zone: %(zone)s") % {"zone": zone_name()})


zone_help = lazy(_zone_help, str)


class ZonedDateTimeInput(forms.DateTimeInput):
    input_type = "datetime-local"

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs=attrs, format=LOCAL_FORMAT)

    def format_value(self, value: Any) -> str | None:
        if isinstance(value, datetime):
            if timezone.is_aware(value):
                value = timezone.localtime(value)
            return str(value.strftime(LOCAL_FORMAT))
        if isinstance(value, str) and value:
            moment = _parse(value)
            if moment is not None and moment.tzinfo is not None:
                return timezone.localtime(moment).strftime(LOCAL_FORMAT)
        return super().format_value(value)


def _parse(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        return None


class ZonedDateTimeField(forms.Field):
    """A date and time typed in the console's time zone (named in the help text)."""

    widget = ZonedDateTimeInput

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", zone_help())
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> datetime | None:
        if isinstance(value, datetime):
            moment: datetime | None = value
        else:
            text = str(value or "").strip()
            if not text:
                return None
            moment = _parse(text)
            if moment is None:
                raise forms.ValidationError(NOT_A_TIME)
        assert moment is not None
        if moment.tzinfo is None:
            moment = timezone.make_aware(moment, timezone.get_current_timezone())
        try:
            return check_bounds(moment, field=str(self.label or ""))
        except ValidationFailure as failure:
            raise forms.ValidationError(failure.message) from None


class ScopeInput(forms.TextInput):
    """A text input suggesting existing values from a ``<datalist>`` rendered beside it."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs={"autocomplete": "off", **(attrs or {})})
        self.options: Callable[[], Iterable[str]] | Iterable[str] = ()

    def render(
        self,
        name: str,
        value: Any,
        attrs: dict[str, Any] | None = None,
        renderer: Any = None,
    ) -> SafeString:
        options = self.options() if callable(self.options) else self.options
        values = sorted(set(options))
        if not values:
            return super().render(name, value, attrs, renderer)
        list_id = f"{(attrs or {}).get('id') or self.attrs.get('id') or name}-options"
        field = super().render(name, value, {**(attrs or {}), "list": list_id}, renderer)
        items = format_html_join("", '<option value="{}"></option>', ((v,) for v in values))
        return format_html('{}<datalist id="{}">{}</datalist>', field, list_id, items)


class ScopeSelect(forms.Select):
    """A filter's choice among the values that exist (``any_label`` first, for no filter). The
    field stays free text: the value in the address shows among the options even when none has
    it, so a shared link keeps its filter."""

    def __init__(self, *, any_label: Any, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs=attrs)
        self.any_label = any_label
        self.values: Callable[[], Iterable[str]] | Iterable[str] = ()

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        known = self.values() if callable(self.values) else self.values
        current = {str(v) for v in (value if isinstance(value, list | tuple) else [value]) if v}
        values = sorted(set(known) | current)
        self.choices = [("", self.any_label), *((v, v) for v in values)]
        return super().get_context(name, value, attrs)


def offer_values(form: forms.Form, values: Callable[[], Mapping[str, Iterable[str]]]) -> None:
    """Give each scope field of ``form`` (by name: tenant, brand, store, campaign, deployment) a
    datalist of existing values. ``values`` is called once, when the first of them renders, so a
    response that never renders the form (an htmx fragment) reads nothing."""
    cache: dict[str, Mapping[str, Iterable[str]]] = {}

    def of(name: str) -> Callable[[], Iterable[str]]:
        def options() -> Iterable[str]:
            if "values" not in cache:
                cache["values"] = values()
            return cache["values"].get(name, ())

        return options

    for name, field in form.fields.items():
        if name in SCOPE_NAMES and isinstance(field.widget, ScopeSelect):
            field.widget.values = of(name)
        elif name in SCOPE_NAMES and isinstance(field.widget, forms.TextInput):
            if not isinstance(field.widget, ScopeInput):
                field.widget = ScopeInput(attrs=field.widget.attrs)
            field.widget.options = of(name)


SCOPE_NAMES = SCOPE_FIELDS

# What the shared field partial offers when a form did not set its own values: installed by the
# project shell (console.apps), as it reads memories this core app knows nothing of.
_provider: list[Callable[[Any], Mapping[str, Iterable[str]]]] = []


def scope_values_provider_install(provider: Callable[[Any], Mapping[str, Iterable[str]]]) -> None:
    _provider[:] = [provider]


def scope_values_for(request: Any) -> Mapping[str, Iterable[str]]:
    """The installed provider's values for the request's user, read once per request."""
    if not _provider or request is None:
        return {}
    cached = getattr(request, "_scope_values", None)
    if cached is None:
        cached = _provider[0](request.user)
        request._scope_values = cached
    return cached


def render_with_options(field: Any, request: Any) -> SafeString:
    """A bound field rendered with a datalist of existing values when it is a scope text field
    and the form gave it none of its own; any other field as it renders anyway."""
    widget = field.field.widget
    if (
        field.name not in SCOPE_NAMES
        or not isinstance(widget, forms.TextInput)
        or isinstance(widget, ScopeInput)
        or "list" in widget.attrs
    ):
        return SafeString(str(field))
    values = sorted(set(scope_values_for(request).get(field.name, ())))
    if not values:
        return SafeString(str(field))
    list_id = f"{field.auto_id or field.html_name}-options"
    rendered = field.as_widget(attrs={"list": list_id, "autocomplete": "off"})
    items = format_html_join("", '<option value="{}"></option>', ((v,) for v in values))
    return format_html('{}<datalist id="{}">{}</datalist>', rendered, list_id, items)
