"""The PNG chart of a cost estimate: one timeline row per engine and DMA engine, and the roofline.

Drawn from the report's Chrome trace (the same slices Perfetto shows) with matplotlib's
non-interactive Agg backend, so it works on machines without a display. matplotlib is an
optional dependency (``pip install 'torch-nki[plot]'``); without it, plotting raises
``ImportError`` naming the package to install.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch_nki._cost import CostReport

__all__ = ["write_cost_plot"]


def _tracks(trace_json: str) -> list[tuple[str, list[tuple[float, float, str]]]]:
    """Rows of the timeline, in the trace's sort order: ``(track name, [(start µs, dur µs, op)])``."""
    events: list[dict[str, Any]] = json.loads(trace_json)["traceEvents"]
    names: dict[int, str] = {}
    order: dict[int, int] = {}
    slices: dict[int, list[tuple[float, float, str]]] = {}
    for e in events:
        tid = int(e["tid"])
        if e["ph"] == "M" and e["name"] == "thread_name":
            names[tid] = str(e["args"]["name"])
        elif e["ph"] == "M" and e["name"] == "thread_sort_index":
            order[tid] = int(e["args"]["sort_index"])
        elif e["ph"] == "X":
            slices.setdefault(tid, []).append((float(e["ts"]), float(e["dur"]), str(e["name"])))
    tids = sorted(slices, key=lambda t: (order.get(t, t), t))
    return [(names.get(t, f"track {t}"), slices[t]) for t in tids]


def write_cost_plot(report: CostReport, path: Path) -> Path:
    """Draws ``report`` to a PNG at ``path`` and returns the path."""
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError(
            "torch_nki: plotting a cost report needs matplotlib; install it with "
            "`pip install 'torch-nki[plot]'` (or `pip install matplotlib`)"
        ) from e
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    tracks = _tracks(report.trace_json)
    ops = sorted({op for _, spans in tracks for _, _, op in spans})
    palette = plt.get_cmap("tab10")
    colour = {op: palette(i % 10) for i, op in enumerate(ops)}

    fig, (timeline, roofline) = plt.subplots(
        2,
        1,
        figsize=(11, 2.0 + 0.28 * len(tracks) + 1.6),
        gridspec_kw={"height_ratios": [max(2, len(tracks)), 3]},
    )
    for row, (_, spans) in enumerate(tracks):
        for op in ops:
            bars = [(ts, dur) for ts, dur, name in spans if name == op]
            if bars:
                timeline.broken_barh(bars, (row - 0.4, 0.8), facecolors=colour[op], linewidth=0)
    timeline.set_yticks(range(len(tracks)), [name for name, _ in tracks])
    timeline.invert_yaxis()
    timeline.set_xlim(0, report.total_ns / 1e3)
    timeline.set_xlabel("µs (estimate)")
    timeline.legend(
        handles=[matplotlib.patches.Patch(color=colour[op], label=op) for op in ops],
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize="small",
    )
    timeline.set_title(
        f"{report.op} on {report.target}: {report.total_ns / 1e3:.1f} µs estimated, "
        f"{report.bound}-bound at {report.roofline_fraction:.0%} of its roofline"
    )

    resources = list(report.min_ns)
    peak_us = [report.min_ns[r] / 1e3 for r in resources]
    roofline.barh(resources, peak_us, color="tab:gray", label="time at peak rate")
    roofline.axvline(report.total_ns / 1e3, color="tab:red", label="estimated time")
    roofline.invert_yaxis()
    roofline.set_xlabel("µs")
    roofline.set_title("roofline: each resource's time for this work at its peak rate", fontsize="medium")
    roofline.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
