"""The with/without chart of a replay, drawn off-screen (Agg) into PNG bytes.

Figures are built directly rather than through pyplot, so no global figure state is shared
between requests or threads. Its words are translatable: the replay command stores the chart in
English; the report page draws it again in the reader's language when that is not English
(``evaluation.views.report_chart_png``), in a CJK font where one is installed.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from functools import cache

import matplotlib

matplotlib.use("Agg")

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django.utils.translation import pgettext_lazy
from matplotlib import font_manager
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

QUALITY: tuple[tuple[str, str | Promise], ...] = (
    ("missed_checks", _("missed\nchecks")),
    ("wrong_causes", _("wrong\ncauses")),
    ("correct_causes", _("correct\ncauses")),
    ("necessary_followups", _("necessary\nquestions")),
    ("unnecessary_followups", _("unnecessary\nquestions")),
)
COST: tuple[tuple[str, str | Promise], ...] = (
    ("tool_calls", _("tool\ncalls")),
    ("calls_to_cause", _("calls to\ncause")),
)
# Fonts that draw Chinese, the first installed one used after matplotlib's own (Latin) font.
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "WenQuanYi Zen Hei", "Source Han Sans SC")


@cache
def cjk_font() -> str | None:
    """The first installed font of :data:`CJK_FONTS`, or None (the chart then stays English)."""
    for name in CJK_FONTS:
        try:
            font_manager.findfont(name, fallback_to_default=False)
        except ValueError:
            continue
        return name
    return None


WITH_COLOUR = "#2f6f4f"
WITHOUT_COLOUR = "#b0b7bf"
BAR = 0.38


def _bars(
    axes: Axes,
    metrics: tuple[tuple[str, str | Promise], ...],
    with_memory: Mapping[str, int],
    without_memory: Mapping[str, int],
) -> None:
    positions = list(range(len(metrics)))
    for offset, values, colour, label in (
        (-BAR / 2, with_memory, WITH_COLOUR, str(_("with memory"))),
        (BAR / 2, without_memory, WITHOUT_COLOUR, str(_("without memory"))),
    ):
        heights = [values.get(name, 0) for name, _label in metrics]
        bars = axes.bar([p + offset for p in positions], heights, BAR, color=colour, label=label)
        axes.bar_label(bars, padding=2, fontsize=8)
    axes.set_xticks(positions, [str(label) for _name, label in metrics], fontsize=8)
    axes.spines[["top", "right"]].set_visible(False)
    axes.margins(y=0.15)


# Which memory a replay ran against (``ReplayReport.memory``), as the chart's title says it.
MEMORY_WORDS = {
    "demo": pgettext_lazy("replay memory", "demo"),
    "current": pgettext_lazy("replay memory", "current"),
}


def chart_title(*, ticket_set: str, tickets: int, memory: str) -> str:
    """The chart's title: the ticket set, how many held-out tickets, which memory."""
    return str(
        _("%(set)s: %(tickets)d held-out tickets, %(memory)s memory")
        % {"set": ticket_set, "tickets": tickets, "memory": MEMORY_WORDS.get(memory, memory)}
    )


def render_chart(
    *,
    title: str,
    with_memory: Mapping[str, int],
    without_memory: Mapping[str, int],
    font: str | None = None,
) -> bytes:
    """The chart in the active language; ``font`` (a CJK font) backs up the default font."""
    families = ["DejaVu Sans", font] if font else ["DejaVu Sans"]
    # rc_context only while the figure's artists are made: they read the family then.
    with matplotlib.rc_context({"font.family": families}):
        return _render(title=title, with_memory=with_memory, without_memory=without_memory)


def _render(
    *, title: str, with_memory: Mapping[str, int], without_memory: Mapping[str, int]
) -> bytes:
    figure = Figure(figsize=(8.0, 3.6), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    quality, cost = figure.subplots(1, 2, width_ratios=[5, 2.2])
    _bars(quality, QUALITY, with_memory, without_memory)
    _bars(cost, COST, with_memory, without_memory)
    quality.set_ylabel(str(_("count over all tickets")))
    quality.set_title(str(_("lower is better, except correct causes")), fontsize=8, loc="left")
    cost.set_title(str(_("lower is better")), fontsize=8, loc="left")
    figure.legend(
        *quality.get_legend_handles_labels(), loc="outside upper right", frameon=False, fontsize=8
    )
    figure.suptitle(title, fontsize=10, x=0.02, ha="left")
    buffer = io.BytesIO()
    # No software/date metadata: the same report draws the same bytes.
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
