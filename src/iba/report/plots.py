"""PNG figures (matplotlib, Agg backend, no display needed) for Figure 5 and a domain overview.

Each function takes an analyses Series ({row label: {x: (value x100, n)}}) and returns PNG
bytes, or None when the series is empty (the report then leaves the figure out and says so).
Score bars carry their 95% bootstrap intervals (tables.score_bars computes what is drawn).
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")  # before pyplot: reports are written on headless machines

import matplotlib.pyplot as plt  # noqa: E402

from iba.report.analyses import Series  # noqa: E402
from iba.report.table_value import is_reference  # noqa: E402

_STYLE = {"figure.dpi": 110, "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True,
          "grid.alpha": 0.3, "font.size": 9, "legend.fontsize": 7}


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", metadata={"Software": None})  # no version stamp
    plt.close(fig)
    return buf.getvalue()


def _empty(series: Series) -> bool:
    return not any(v is not None for pts in series.values() for v, _ in pts.values())


def line_plot(series: Series, title: str, xlabel: str, ylabel: str = "score (x100)") -> bytes | None:
    """One line per row over ordered x labels; points without a value are gaps."""
    if _empty(series):
        return None
    xs = list(dict.fromkeys(x for pts in series.values() for x in pts))  # in first-seen order
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(6.0, 3.6))
        for label, pts in series.items():
            ys = [pts.get(x, (None, 0))[0] for x in xs]
            ax.plot(range(len(xs)), [float("nan") if y is None else y for y in ys], marker="o", label=label,
                    linestyle="--" if is_reference(label) else "-")  # a reference row is drawn apart
        ax.set_xticks(range(len(xs)), xs)
        ax.set(title=title, xlabel=xlabel, ylabel=ylabel, ylim=(0, 105))
        ax.legend(loc="best")
        return _png(fig)


def bar_plot(series: Series, title: str, xlabel: str = "", ylabel: str = "score (x100)",
             intervals: dict[str, dict[str, tuple[float, float]]] | None = None) -> bytes | None:
    """Grouped bars: one group per x label, one bar per row; `intervals` ({row: {x: (lo, hi)}},
    same scale as the values) adds an error bar to each bar that has one."""
    if _empty(series):
        return None
    xs = list(dict.fromkeys(x for pts in series.values() for x in pts))  # in first-seen order
    k = max(1, len(series))
    width = 0.8 / k
    intervals = intervals or {}
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots(figsize=(max(4.5, 1.1 * len(xs) * max(1, k / 2)), 3.6))
        for j, (label, pts) in enumerate(series.items()):
            ys = [pts.get(x, (None, 0))[0] for x in xs]
            pos = [i - 0.4 + width * (j + 0.5) for i in range(len(xs))]
            bars = ax.bar(pos, [0 if y is None else y for y in ys], width=width, label=label,
                          hatch="///" if is_reference(label) else None)  # a reference row is drawn apart
            for x, p, b, y in zip(xs, pos, bars, ys):
                if y is None:
                    continue
                top = y
                ci = intervals.get(label, {}).get(x)
                if ci is not None:
                    lo, hi = ci
                    ax.errorbar([p], [y], yerr=[[y - lo], [hi - y]], fmt="none", ecolor="#333333", elinewidth=0.8,
                                capsize=2)
                    top = max(y, hi)
                ax.annotate(f"{y:.1f}", (b.get_x() + b.get_width() / 2, top), ha="center", va="bottom", fontsize=6)
        ax.set_xticks(range(len(xs)), xs)
        ax.set(title=title, xlabel=xlabel, ylabel=ylabel, ylim=(0, 110))
        # outside the axes: bars reach 100 and error bars span the height, so no corner is free
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
        return _png(fig)
