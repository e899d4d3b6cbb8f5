"""``{{ code|investigation_code }}``: an investigation's code (conclusion, refusal, end reason) as
a translated sentence, the code in the tooltip (``investigations.sentences`` holds the mapping)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from experience.templatetags.code_sentences import sentence_html
from investigations.sentences import investigation_sentence

register = template.Library()


@register.filter
def investigation_code(value: object) -> SafeString | str:
    if value is None or value == "":
        return ""
    return sentence_html(investigation_sentence(str(value)))
