"""Charts of the runner's results (matplotlib, imported only when a chart is written).

Every chart carries a stamp: the versions measured, the mode (quick or full), the date
and the machine, so a picture cannot be mistaken for another run's.
"""

from __future__ import annotations

import os
from typing import Any

INSTALL_HINT = "pip install 'amrita-sense-turbo[plot]'"


def plot_problem(path: str) -> str:
    """Why a chart could not be written to `path` ("" when it can): checked before measuring."""
    try:
        import matplotlib  # noqa: F401 - a broken install fails here too, before anything is measured
    except ImportError as exc:
        return f"--plot needs matplotlib, which cannot be imported here ({exc}): {INSTALL_HINT}"
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"--plot {path}: the directory {directory} does not exist"
    if not os.access(directory, os.W_OK):
        return f"--plot {path}: cannot write into {directory}"
    return ""


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # an SVG chart keeps its text as text
    import matplotlib.pyplot as plt

    return plt


def stamp(meta: dict) -> str:
    """Two lines: what was measured and how; when and where."""
    builds = meta.get("builds", {})
    ours = next((b.get("version") for key, b in builds.items() if key != "ref" and b.get("version")), None)
    what = [f"amrita-sense-turbo {ours}"] if ours else []
    if "ref" in builds:
        what.append(f"against {builds['ref'].get('label', 'ref')}")
    mode = "quick run (smoke sizes)" if meta.get("quick") else f"full run ({meta.get('repeats')} repetitions)"
    machine = meta.get("machine", {})
    cores = f"{machine['cpu_count']} cores" if machine.get("cpu_count") else ""
    where = ", ".join(v for v in (machine.get("cpu") or machine.get("processor"), cores, machine.get("platform")) if v)
    return f"{' '.join(what)} | {mode}\n{meta.get('started', '')} | {where}"


def _save(fig: Any, plt: Any, path: str, meta: dict) -> str:
    fig.text(0.01, 0.005, stamp(meta), fontsize=6.5, color="dimgrey", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"chart written to {path}"


def speedups(path: str, rows: list[dict], meta: dict) -> str:
    """Bars of the primary build's speed-ups per scenario, one panel per event loop."""
    series = [("vs_ref", "vs 1.1.3"), ("vs_pure", "vs the pure build")]
    loops = list(dict.fromkeys(r["loop"] for r in rows))
    data = {
        loop: [
            r
            for r in rows
            if r["loop"] == loop and r["kind"] not in ("floor", "durable") and any(r["ratios"][m] for m, _ in series)
        ]
        for loop in loops
    }
    if not any(data.values()):
        return "--plot: no speed-up to chart (needs the compiled build and the pure build or the reference)"
    plt = _pyplot()
    height = max(len(v) for v in data.values())
    fig, axes = plt.subplots(1, len(loops), figsize=(6.5 * len(loops), 0.42 * height + 2.0), squeeze=False)
    for ax, loop in zip(axes[0], loops):
        _speedup_panel(ax, loop, data[loop], series)
    return _save(fig, plt, path, meta)


def _speedup_panel(ax: Any, loop: str, sel: list[dict], series: list[tuple]) -> None:
    for offset, (metric, label) in enumerate(series):
        values = [r["ratios"][metric] or 0 for r in sel]
        ys = [i + offset * 0.4 for i in range(len(sel))]
        ax.barh(ys, values, height=0.38, label=f"compiled {label}")
        for y, v in zip(ys, values):
            if v:
                ax.text(v, y, f" {v:.1f}x", va="center", fontsize=7)
    ax.set_yticks([i + 0.2 for i in range(len(sel))])
    ax.set_yticklabels([r["scenario"] for r in sel], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    shown = [r["ratios"][m] for r in sel for m, _ in series if r["ratios"][m]]
    ax.set_xlim(min(min(shown), 1.0) / 2, max(max(shown), 1.0) * 3)  # room for the value labels
    ax.axvline(1, color="grey", linewidth=0.8)
    ax.set_xlabel("speed-up (x, log scale; higher is better)")
    ax.set_title(f"amrita-sense-turbo speed-ups ({loop})")
    ax.legend(fontsize=8, loc="lower right")


def node_profile(path: str, profiles: list[dict], meta: dict, top: int = 15) -> str:
    """Per build, stacked bars per node function: its body and the engine's time before it."""
    shown = [p for p in profiles if p.get("rows")]
    if not shown:
        return "--plot: no profile to chart"
    plt = _pyplot()
    height = min(top, max(len(p["rows"]) for p in shown)) + 1
    fig, axes = plt.subplots(1, len(shown), figsize=(6.0 * len(shown), 0.4 * height + 2.2), squeeze=False)
    for ax, profile in zip(axes[0], shown):
        rows = profile["rows"][:top]
        names = [r["label"] for r in rows] + ["(engine, after the last node)"]
        body = [r["body_s"] * 1e6 for r in rows] + [0.0]
        engine = [r["engine_s"] * 1e6 for r in rows] + [profile["after_s"] * 1e6]
        ys = list(range(len(names)))
        ax.barh(ys, body, color="tab:green", label="node body")
        ax.barh(ys, engine, left=body, color="tab:red", label="engine overhead")
        ax.set_yticks(ys)
        ax.set_yticklabels(names, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("microseconds per run")
        ax.set_title(f"{profile['title']}: {profile['run_s'] * 1e6:.1f} us per run", fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
    return _save(fig, plt, path, meta)
