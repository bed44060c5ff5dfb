"""The benchmark's results file: what a run writes about the machine and the builds (`_meta`), and
how a file written before a build key was renamed still reads (`_rename_old_keys`, for `--report`)."""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import sys
from typing import Any

LABELS = {"compiled": "compiled", "pure": "pure build", "ref": "1.1.3"}
# Names the runner once used, still accepted: `--builds`, results files read by `--report`, and the
# scenarios' target metrics (old name -> new name).
OLD_BUILD_KEYS = {"twin": "pure"}
OLD_RATIO_KEYS = {"vs_twin": "vs_pure", "twin_vs_ref": "pure_vs_ref"}


def _rename_old_keys(rows: list[dict], meta: dict) -> None:
    """A results file written before a build key was renamed reads as if written now: its
    build keys, ratio names and the targets' build are given their current names, in place."""
    meta["builds"] = {_renamed(key): _relabelled(key, b) for key, b in meta["builds"].items()}
    for row in rows:
        row["builds"] = {_renamed(key): cell for key, cell in row["builds"].items()}
        ratios = row["ratios"]
        row["ratios"] = {OLD_RATIO_KEYS.get(name, name): value for name, value in ratios.items()}
        for name in ("x_floor", "x_primary"):
            if isinstance(row["ratios"].get(name), dict):
                row["ratios"][name] = {_renamed(key): value for key, value in row["ratios"][name].items()}
        row["primary"] = _renamed(row.get("primary"))
        for verdict in row.get("targets") or ():
            verdict["build"] = _renamed(verdict.get("build"))


def _renamed(key: Any) -> Any:
    return OLD_BUILD_KEYS.get(key, key) if isinstance(key, str) else key


def _relabelled(key: str, build: dict) -> dict:
    """An old build's label was its key: it takes the renamed build's label."""
    if key in OLD_BUILD_KEYS and build.get("label") in (None, "", key):
        return {**build, "label": LABELS[OLD_BUILD_KEYS[key]]}
    return build


def _meta(
    args: argparse.Namespace, builds: list[Any], build_info: dict, loops: list[str], started: _dt.datetime
) -> dict:
    return {
        "command": [sys.executable, "-m", "amrita_sense.bench"] + (sys.argv[1:] if sys.argv else []),
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round((_dt.datetime.now(_dt.timezone.utc) - started).total_seconds(), 1),
        "machine": {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "processor": platform.processor(),
            "cpu": _cpu_model(),
            "cpu_count": os.cpu_count(),
        },
        "loops": loops,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "budget_s": args.budget,
        "quick": args.quick,
        "families": list(args.family_list),
        "builds": {
            b.key: {
                "label": b.label,
                "python": b.python,
                "version": b.info.get("version"),
                "implementation": b.info.get("implementation"),
                "per_loop": {loop: build_info.get((loop, b.key)) for loop in loops},
                "durable": b.durable,
                **_peer_meta(b),
            }
            for b in builds
        },
    }


def _peer_meta(build: Any) -> dict:
    if not build.peer:
        return {}
    keys = ("versions", "requirements", "telemetry")
    return {
        "peer": True,
        "kinds": list(build.kinds),
        **{key: build.info.get(key) for key in keys},
        "problem": build.problem or None,
    }


def _cpu_model() -> str:
    """The processor's model name where the system says it (Linux), else platform.processor()."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
