"""``{% field_input field %}``: a form field's input, with a datalist of existing scope values for
scope fields (``reviewconsole.formfields``)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from reviewconsole.formfields import render_with_options

register = template.Library()


@register.simple_tag(takes_context=True)
def field_input(context: template.Context, field: Any) -> SafeString:
    # `include ... only` drops the variables, not the request a RequestContext carries.
    return render_with_options(field, getattr(context, "request", None))
