"""The runs-per-hour chart: a stacked bar per hour, by outcome, drawn as SVG on the server (no
script, no library in the browser)."""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape

__all__ = ["OUTCOMES", "runs_chart"]

#: The outcomes drawn, bottom to top, with their colours.
OUTCOMES = (
    ("succeeded", "#2f9e44"),
    ("failed", "#f08c00"),
    ("dead", "#e03131"),
    ("lost", "#868e96"),
)

_W, _H = 720, 200  # the drawing's size (px)
_LEFT, _BOTTOM, _TOP = 40, 24, 24  # margins for the axis labels and the legend (px)


def runs_chart(counts: dict[tuple[int, str], int], last_hour: int, hours: int = 24) -> str:
    """An SVG document of the runs finished in each of the ``hours`` hours up to and including
    ``last_hour`` (hours since the epoch), stacked by outcome.

    Args:
        counts: Runs by ``(hour since the epoch, state)`` (``StoreView.runs_per_hour``).
        last_hour: The latest hour drawn (hours since the epoch, UTC).
        hours: How many hours are drawn.
    """
    first = last_hour - hours + 1
    totals = [sum(counts.get((first + i, state), 0) for state, _ in OUTCOMES) for i in range(hours)]
    top = max([1, *totals])
    plot_w, plot_h = _W - _LEFT - 8, _H - _BOTTOM - _TOP
    step = plot_w / hours
    bar = max(1.0, step * 0.8)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {_W} {_H}" '
        f'width="{_W}" height="{_H}" role="img" aria-labelledby="chart-title">',
        f'<title id="chart-title">Runs finished per hour (UTC), last {hours} hours, by '
        "outcome</title>",
        f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_W - 8}" y2="{_TOP + plot_h}" '
        'stroke="#888"/>',
        f'<text x="{_LEFT - 4}" y="{_TOP + 4}" text-anchor="end" class="axis">{top}</text>',
        f'<text x="{_LEFT - 4}" y="{_TOP + plot_h}" text-anchor="end" class="axis">0</text>',
    ]
    for i in range(hours):
        x = _LEFT + i * step + (step - bar) / 2
        y = float(_TOP + plot_h)
        hour = first + i
        for state, colour in OUTCOMES:
            n = counts.get((hour, state), 0)
            if not n:
                continue
            h = plot_h * n / top
            y -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'fill="{colour}"><title>{_hour(hour)}: {n} {escape(state)}</title></rect>'
            )
        if i % 3 == 0 or i == hours - 1:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{_H - 8}" text-anchor="middle" class="axis">'
                f"{_hour(hour)[-5:]}</text>"
            )
    x = _LEFT
    for state, colour in OUTCOMES:
        parts.append(f'<rect x="{x}" y="6" width="10" height="10" fill="{colour}"/>')
        parts.append(f'<text x="{x + 14}" y="15" class="axis">{escape(state)}</text>')
        x += 90
    parts.append("</svg>")
    return "".join(parts)


def _hour(hour: int) -> str:
    return f"{datetime.fromtimestamp(hour * 3600, timezone.utc):%Y-%m-%d %H:00}"
