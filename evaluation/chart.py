"""The with/without chart of a replay, drawn off-screen (Agg) into PNG bytes.

Figures are built directly rather than through pyplot, so no global figure state is shared
between requests or threads.
"""

from __future__ import annotations

import io
from collections.abc import Mapping

import matplotlib

matplotlib.use("Agg")

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

QUALITY = (
    ("missed_checks", "missed\nchecks"),
    ("wrong_causes", "wrong\ncauses"),
    ("correct_causes", "correct\ncauses"),
    ("necessary_followups", "necessary\nquestions"),
    ("unnecessary_followups", "unnecessary\nquestions"),
)
COST = (("tool_calls", "tool\ncalls"), ("calls_to_cause", "calls to\ncause"))
WITH_COLOUR = "#2f6f4f"
WITHOUT_COLOUR = "#b0b7bf"
BAR = 0.38


def _bars(
    axes: Axes,
    metrics: tuple[tuple[str, str], ...],
    with_memory: Mapping[str, int],
    without_memory: Mapping[str, int],
) -> None:
    positions = list(range(len(metrics)))
    for offset, values, colour, label in (
        (-BAR / 2, with_memory, WITH_COLOUR, "with memory"),
        (BAR / 2, without_memory, WITHOUT_COLOUR, "without memory"),
    ):
        heights = [values.get(name, 0) for name, _ in metrics]
        bars = axes.bar([p + offset for p in positions], heights, BAR, color=colour, label=label)
        axes.bar_label(bars, padding=2, fontsize=8)
    axes.set_xticks(positions, [label for _, label in metrics], fontsize=8)
    axes.spines[["top", "right"]].set_visible(False)
    axes.margins(y=0.15)


def render_chart(
    *, title: str, with_memory: Mapping[str, int], without_memory: Mapping[str, int]
) -> bytes:
    figure = Figure(figsize=(8.0, 3.6), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    quality, cost = figure.subplots(1, 2, width_ratios=[5, 2.2])
    _bars(quality, QUALITY, with_memory, without_memory)
    _bars(cost, COST, with_memory, without_memory)
    quality.set_ylabel("count over all tickets")
    quality.set_title("lower is better, except correct causes", fontsize=8, loc="left")
    cost.set_title("lower is better", fontsize=8, loc="left")
    figure.legend(
        *quality.get_legend_handles_labels(), loc="outside upper right", frameon=False, fontsize=8
    )
    figure.suptitle(title, fontsize=10, x=0.02, ha="left")
    buffer = io.BytesIO()
    # No software/date metadata: the same report draws the same bytes.
    figure.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()
