"""Compare builds of amrita_sense on the benchmark scenarios, side by side.

Each build runs in its own worker process (one per build and event loop):
  compiled  amrita-sense-turbo with the compiled core (AMRITA_SENSE_REQUIRE_EXTENSIONS=1)
  twin      amrita-sense-turbo with the pure-Python twin (AMRITA_SENSE_NO_EXTENSIONS=1)
  ref       amrita-sense 1.1.3 under another Python (--against /path/to/venv/bin/python)
Measurements are interleaved: for every scenario, each repetition visits every
build (in rotating order), so machine noise hits all builds alike. One
measurement is the best of the runs that fit in --budget seconds; the table
quotes the median of the --repeats measurements and the ratios between them.

Examples:
  python -m amrita_sense.bench --quick
  python -m amrita_sense.bench --against .venv-ref/bin/python --loop both --json bench-results.json
  python -m amrita_sense.bench --scenarios sync_chain,while_loop --repeats 9
  python -m amrita_sense.bench --workflow myapp.flows:build_graph --against .venv-ref/bin/python
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from amrita_sense.bench import scenarios as S

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_worker.py")
BUILD_ORDER = ("compiled", "twin", "ref")
EXPECT = {"compiled": "cython", "twin": "python", "ref": "reference"}
WORKFLOW_PREFIX = "workflow:"


# ---------------------------------------------------------------------------
# Builds and their worker processes


@dataclass
class Build:
    """One column of the table: which Python runs which amrita_sense."""

    key: str
    python: str
    env: dict
    label: str = ""
    info: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.label = self.label or {"compiled": "compiled", "twin": "twin", "ref": "1.1.3"}[self.key]


def _build_env(key: str) -> dict:
    env = dict(os.environ)
    for name in ("AMRITA_SENSE_NO_EXTENSIONS", "AMRITA_SENSE_REQUIRE_EXTENSIONS"):
        env.pop(name, None)
    if key == "compiled":
        env["AMRITA_SENSE_REQUIRE_EXTENSIONS"] = "1"
    elif key == "twin":
        env["AMRITA_SENSE_NO_EXTENSIONS"] = "1"
    else:  # the reference must not see this checkout's sources
        env.pop("PYTHONPATH", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def resolve_python(path: str) -> str:
    """Accept a Python executable or a virtual-environment directory."""
    if os.path.isdir(path):
        for candidate in ("bin/python", "bin/python3", "Scripts/python.exe"):
            full = os.path.join(path, candidate)
            if os.path.exists(full):
                return full
        raise FileNotFoundError(f"no Python found in the environment {path}")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} does not exist")
    return path


class WorkerProcess:
    """A running `_worker.py` for one build on one event loop."""

    def __init__(self, build: Build, loop: str, extra_paths: list[str]) -> None:
        self.build = build
        self.loop = loop
        self.extra_paths = extra_paths
        self.proc: subprocess.Popen | None = None
        self.replies: queue.Queue = queue.Queue()
        self.stderr_file: Any = None

    def start(self, timeout: float) -> dict:
        args = [self.build.python, WORKER, "--loop", self.loop, "--expect", EXPECT[self.build.key]]
        for path in self.extra_paths:
            args += ["--path", path]
        self.stderr_file = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr_file,
            env=self.build.env, text=True, encoding="utf-8", bufsize=1)
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()
        return self.request({"op": "hello"}, timeout)

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.replies.put(line)
        self.replies.put(None)

    def stderr_tail(self, lines: int = 15) -> str:
        if self.stderr_file is None:
            return ""
        self.stderr_file.seek(0)
        return "".join(self.stderr_file.read().splitlines(keepends=True)[-lines:])

    def request(self, cmd: dict, timeout: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            return {"status": "error", "reason": "worker is not running"}
        try:
            self.proc.stdin.write(json.dumps(cmd) + "\n")
            self.proc.stdin.flush()
            line = self.replies.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            return {"status": "error", "reason": f"timed out after {timeout:g} s"}
        except OSError:  # the worker's stdin is gone: it died
            line = None
        if line is None:
            code = self.proc.wait()
            tail = self.stderr_tail()
            self.proc = None
            return {"status": "error", "reason": f"worker exited with code {code}",
                    "traceback": tail}
        return json.loads(line)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                proc.stdin.close()
                proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        if self.stderr_file is not None:
            self.stderr_file.close()
            self.stderr_file = None


# ---------------------------------------------------------------------------
# Measuring


@dataclass
class Cell:
    """All measurements of one scenario on one build and loop."""

    status: str = "pending"
    values: list = field(default_factory=list)
    runs: list = field(default_factory=list)
    reason: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.status == "ok" and self.values else None


@dataclass
class Job:
    """A scenario (built-in or a user workflow) as the runner schedules it."""

    name: str
    title: str
    unit: str
    measure: str = "time"
    kind: str = "engine"
    floor: str | None = None
    targets: tuple = ()
    size: int | None = None

    def command(self, workflow_runs: int, budget: float) -> dict:
        if self.name.startswith(WORKFLOW_PREFIX):
            return {"op": "workflow", "spec": self.name[len(WORKFLOW_PREFIX):], "runs": workflow_runs,
                    "budget": budget}
        return {"op": "run", "scenario": self.name, "size": self.size, "budget": budget}


def plan_jobs(names: list[str], workflow: str | None, quick: bool) -> list[Job]:
    """Jobs for the chosen scenarios, followed by the floors they need."""
    jobs = []
    if workflow:
        jobs.append(Job(WORKFLOW_PREFIX + workflow, f"your workflow {workflow}", "run"))
    wanted = [n for n in names if S.SCENARIOS[n].kind != "floor"]
    floors = [n for n in names if S.SCENARIOS[n].kind == "floor"]
    for name in wanted:
        floor = S.SCENARIOS[name].floor
        if floor and floor not in floors:
            floors.append(floor)
    for name in wanted + floors:
        spec = S.SCENARIOS[name]
        jobs.append(Job(name, spec.title, spec.unit, spec.measure, spec.kind, spec.floor, spec.targets,
                        spec.quick_size if quick else spec.size))
    return jobs


class Progress:
    """One progress line on stderr (redrawn on a terminal, plain lines otherwise)."""

    def __init__(self, total: int) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.start = time.monotonic()
        self.tty = sys.stderr.isatty()

    def step(self, text: str) -> None:
        self.done += 1
        if self.tty:
            line = f"[{self.done:>4}/{self.total} {self.elapsed()}] {text}"
            sys.stderr.write("\r\033[K" + line[:150])
            sys.stderr.flush()

    def note(self, text: str) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")
        sys.stderr.write(f"[{100 * self.done // self.total:>3}% {self.elapsed()}] {text}\n")
        sys.stderr.flush()

    def elapsed(self) -> str:
        secs = int(time.monotonic() - self.start)
        return f"{secs // 60}:{secs % 60:02d}"


def format_value(value: float | None, measure: str) -> str:
    if value is None:
        return "-"
    if measure == "memory":
        return f"{value:.0f} B"
    return S.format_seconds(value)


def _record(cell: Cell, reply: dict) -> None:
    status = reply.get("status")
    if status == "ok":
        cell.status = "ok"
        cell.values.append(reply["value"])
        cell.runs.append(reply.get("runs", 1))
        return
    cell.status = status or "error"
    cell.reason = reply.get("reason", "")
    if reply.get("traceback"):
        cell.reason += "\n" + reply["traceback"].rstrip()


def run_loop(loop: str, builds: list[Build], jobs: list[Job], args: argparse.Namespace,
             progress: Progress, results: dict, build_info: dict) -> None:
    """Measure every job on every build for one event loop, interleaved."""
    workers: dict[str, WorkerProcess] = {}
    extra_paths = [os.getcwd()] if args.workflow else []
    try:
        for build in builds:
            worker = WorkerProcess(build, loop, extra_paths)
            hello = worker.start(args.timeout)
            build_info[(loop, build.key)] = hello
            if hello.get("status") == "ok":
                workers[build.key] = worker
                progress.note(f"{loop}: {build.label} = {_describe(hello)}")
            else:
                worker.stop()
                progress.note(f"{loop}: {build.label} unavailable: {hello.get('reason')}")
        missing = {key: info.get("reason", "unavailable") for (lp, key), info in build_info.items()
                   if lp == loop and info.get("status") != "ok"}
        for job in jobs:
            _run_job(loop, job, builds, workers, missing, args, progress, results)
    finally:
        for worker in workers.values():
            worker.stop()


def _describe(hello: dict) -> str:
    impl = hello.get("implementation")
    what = f"amrita-sense {hello.get('version')}" if impl == "reference" else f"amrita-sense-turbo ({impl} core)"
    return f"{what}, Python {hello.get('python')} ({hello.get('executable')})"


def _run_job(loop: str, job: Job, builds: list[Build], workers: dict, missing: dict,
             args: argparse.Namespace, progress: Progress, results: dict) -> None:
    cells = {b.key: Cell() for b in builds}
    results[(loop, job.name)] = cells
    order = [b for b in builds if b.key in workers]
    for b in builds:
        if b.key not in workers:
            cells[b.key].status = "n/a"
            cells[b.key].reason = "build unavailable: " + missing.get(b.key, "its worker stopped")
    command = job.command(args.workflow_runs, args.budget)
    rounds = [("warm-up", True)] * args.warmup + [(f"rep {i + 1}/{args.repeats}", False) for i in range(args.repeats)]
    for index, (label, warmup) in enumerate(rounds):
        rotation = index % len(order) if order else 0
        for build in order[rotation:] + order[:rotation]:
            cell = cells[build.key]
            if cell.status not in ("pending", "ok"):
                progress.step(f"{loop} {job.name} {build.label}: {cell.status}")
                continue
            reply = workers[build.key].request(command, args.timeout)
            if warmup and reply.get("status") == "ok":
                progress.step(f"{loop} {job.name} {build.label} {label}")
                continue
            _record(cell, reply)
            shown = format_value(reply.get("value"), job.measure) if cell.status == "ok" else cell.status
            progress.step(f"{loop} {job.name} {build.label} {label}: {shown}")
            if workers[build.key].proc is None:  # crashed or timed out: start a fresh worker
                _restart(loop, build, workers, args, progress)
    summary = " | ".join(f"{b.label} {_cell_text(cells[b.key], job.measure)}" for b in builds)
    progress.note(f"{loop} {job.name}: {summary}")


def _restart(loop: str, build: Build, workers: dict, args: argparse.Namespace, progress: Progress) -> None:
    old = workers.pop(build.key)
    old.stop()
    worker = WorkerProcess(build, loop, old.extra_paths)
    if worker.start(args.timeout).get("status") == "ok":
        workers[build.key] = worker
    else:
        worker.stop()
        progress.note(f"{loop}: {build.label} could not be restarted")


def _cell_text(cell: Cell, measure: str) -> str:
    if cell.status == "ok":
        return format_value(cell.median, measure)
    return {"n/a": "n/a", "fail": "FAIL", "error": "ERR"}.get(cell.status, cell.status)


# ---------------------------------------------------------------------------
# Ratios, targets, table


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def analyse(loop: str, job: Job, cells: dict, results: dict, primary: str | None) -> dict:
    """Medians, ratios and target verdicts for one scenario row."""
    medians = {key: cell.median for key, cell in cells.items()}
    floors = {}
    if job.floor:
        floor_cells = results.get((loop, job.floor), {})
        floors = {key: cell.median for key, cell in floor_cells.items()}
    x_floor = {key: _ratio(medians.get(key), floors.get(key)) for key in cells}
    ratios = {
        "x_floor": x_floor,
        "vs_twin": _ratio(medians.get("twin"), medians.get("compiled")),
        "vs_ref": _ratio(medians.get("ref"), medians.get(primary)) if primary else None,
        "twin_vs_ref": _ratio(medians.get("ref"), medians.get("twin")),
    }
    verdicts = _verdicts(job, medians, ratios, primary)
    return {
        "loop": loop, "scenario": job.name, "title": job.title, "unit": job.unit, "kind": job.kind,
        "measure": job.measure, "size": job.size, "floor": job.floor,
        "floor_median": floors.get(primary) if primary else None,
        "builds": {key: {"status": cell.status, "median": cell.median, "values": cell.values,
                         "runs": cell.runs, "reason": cell.reason or None}
                   for key, cell in cells.items()},
        "ratios": ratios, "primary": primary, "targets": verdicts,
        "met": _met(verdicts),
    }


def _verdicts(job: Job, medians: dict, ratios: dict, primary: str | None) -> list[dict]:
    out = []
    for target in job.targets:
        actual = None
        if primary == "compiled" or target.metric in ("x_floor", "value"):
            actual = {
                "x_floor": ratios["x_floor"].get("compiled"),
                "vs_ref": ratios["vs_ref"],
                "vs_twin": ratios["vs_twin"],
                "value": medians.get("compiled"),
            }[target.metric]
        out.append({"target": target.describe(job.measure), "build": "compiled", "actual": actual,
                    "met": None if actual is None else target.met(actual)})
    if job.kind == "engine" and job.measure == "time" and not job.name.startswith(WORKFLOW_PREFIX):
        actual = ratios["twin_vs_ref"]
        out.append({"target": "twin >=1x vs 1.1.3", "build": "twin", "actual": actual,
                    "met": None if actual is None else actual >= 1})
    return out


def _met(verdicts: list[dict]) -> str:
    if not verdicts:
        return "-"
    missed = [v["target"] for v in verdicts if v["met"] is False]
    if missed:
        return "MISS: " + "; ".join(missed)
    if any(v["met"] is None for v in verdicts):
        return "yes (partly unknown)" if any(v["met"] for v in verdicts) else "?"
    return "yes"


def _fmt_ratio(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x" if value < 10 else f"{value:.0f}x" if value >= 100 else f"{value:.1f}x"


def render_table(rows: list[dict], builds: list[Build], primary: str | None) -> str:
    """The human table: one section per loop, floors at the end of each."""
    labels = {b.key: b.label for b in builds}
    keys = [b.key for b in builds]
    header = (["scenario", "per"] + [labels[k] for k in keys] + ["floor", "x floor"]
              + (["vs twin"] if primary == "compiled" and "twin" in keys else [])
              + (["vs 1.1.3"] if "ref" in keys else [])
              + (["twin vs 1.1.3"] if "twin" in keys and "ref" in keys else [])
              + ["targets met"])
    out = []
    for loop in dict.fromkeys(r["loop"] for r in rows):
        body = []
        for row in [r for r in rows if r["loop"] == loop and r["kind"] != "floor"]:
            body.append(_table_row(row, keys, header))
        floors = [r for r in rows if r["loop"] == loop and r["kind"] == "floor"]
        for row in floors:
            body.append(_table_row(row, keys, header))
        title = f"event loop: {loop}" + (f"   (ratios for the {labels[primary]} build)" if primary else "")
        out.append(title)
        out.append(_grid(header, body, split=len(body) - len(floors)))
    return "\n\n".join(out)


def _table_row(row: dict, keys: list[str], header: list[str]) -> list[str]:
    measure = row["measure"]
    cells = [row["scenario"], row["unit"]]
    for key in keys:
        build = row["builds"][key]
        cells.append(format_value(build["median"], measure) if build["status"] == "ok"
                     else {"n/a": "n/a", "fail": "FAIL", "error": "ERR"}.get(build["status"], "-"))
    primary = row["primary"]
    cells.append(format_value(row["floor_median"], "time") if row["floor"] else "")
    cells.append(_fmt_ratio(row["ratios"]["x_floor"].get(primary)) if row["floor"] and primary else "")
    if "vs twin" in header:
        cells.append(_fmt_ratio(row["ratios"]["vs_twin"]))
    if "vs 1.1.3" in header:
        cells.append(_fmt_ratio(row["ratios"]["vs_ref"]))
    if "twin vs 1.1.3" in header:
        cells.append(_fmt_ratio(row["ratios"]["twin_vs_ref"]))
    cells.append(row["met"] if row["kind"] != "floor" else "")
    return cells


def _grid(header: list[str], body: list[list[str]], split: int) -> str:
    widths = [max(len(str(r[i])) for r in [header] + body) for i in range(len(header))]
    numeric = set(range(2, len(header) - 1))

    def line(cells: list[str]) -> str:
        parts = [c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    lines = [line(header), rule] + [line(r) for r in body[:split]]
    if split < len(body):
        lines += [rule] + [line(r) for r in body[split:]]
    return "\n".join(lines)


def render_notes(rows: list[dict], builds: list[Build]) -> str:
    """Why cells are n/a, FAIL or ERR (each distinct reason once)."""
    labels = {b.key: b.label for b in builds}
    seen: dict[tuple, tuple[dict, dict]] = {}
    for row in rows:
        for key, build in row["builds"].items():
            if build["status"] in ("n/a", "fail", "error"):
                first = (build["reason"] or "").splitlines()[0] if build["reason"] else ""
                who, where = seen.setdefault((build["status"], first), ({}, {}))
                who[labels.get(key, key)] = None
                where[f"{row['scenario']}@{row['loop']}"] = None
    lines = []
    for (status, reason), (who, where) in seen.items():
        lines.append(f"  {status.upper()} on {', '.join(who)}: {reason}\n      in {', '.join(where)}")
    return "notes:\n" + "\n".join(lines) if lines else ""


# ---------------------------------------------------------------------------
# Outputs: JSON and chart


def write_json(path: str, rows: list[dict], meta: dict) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"schema": 1, "meta": meta, "results": rows}, handle, indent=2, default=str)
        handle.write("\n")


def write_plot(path: str, rows: list[dict], builds: list[Build]) -> str:
    """Bar chart of the compiled build's speed-ups; returns a message for the user."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ("--plot needs matplotlib, which is not installed for this Python; "
                "install it with: pip install 'amrita-sense-turbo[plot]'  (no chart written)")
    series = [("vs_ref", "vs 1.1.3"), ("vs_twin", "vs twin")]
    loops = list(dict.fromkeys(r["loop"] for r in rows))
    data = {loop: [r for r in rows if r["loop"] == loop and r["kind"] != "floor"
                   and any(r["ratios"][m] for m, _ in series)] for loop in loops}
    if not any(data.values()):
        return "--plot: no speed-up to chart (needs the compiled build and the twin or the reference)"
    height = max(len(v) for v in data.values())
    fig, axes = plt.subplots(1, len(loops), figsize=(6.5 * len(loops), 0.42 * height + 1.8), squeeze=False)
    for ax, loop in zip(axes[0], loops):
        sel = data[loop]
        names = [r["scenario"] for r in sel]
        for offset, (metric, label) in enumerate(series):
            values = [r["ratios"][metric] or 0 for r in sel]
            ys = [i + offset * 0.4 for i in range(len(sel))]
            ax.barh(ys, values, height=0.38, label=f"compiled {label}")
            for y, v in zip(ys, values):
                if v:
                    ax.text(v, y, f" {v:.1f}x", va="center", fontsize=7)
        ax.set_yticks([i + 0.2 for i in range(len(sel))])
        ax.set_yticklabels(names, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        shown = [r["ratios"][m] for r in sel for m, _ in series if r["ratios"][m]]
        ax.set_xlim(min(min(shown), 1.0) / 2, max(max(shown), 1.0) * 3)  # room for the value labels
        ax.axvline(1, color="grey", linewidth=0.8)
        ax.set_xlabel("speed-up (x, log scale; higher is better)")
        ax.set_title(f"amrita-sense-turbo speed-ups ({loop})")
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"chart written to {path}"


# ---------------------------------------------------------------------------
# Command line


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m amrita_sense.bench", description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", metavar="PYTHON",
                        help="a Python (or venv directory) with amrita-sense==1.1.3 to compare with")
    parser.add_argument("--python", metavar="PYTHON", default=sys.executable,
                        help="the Python that runs this project's builds (default: this one)")
    parser.add_argument("--builds", metavar="LIST",
                        help="comma list of compiled,twin,ref (default: compiled,twin, plus ref with --against)")
    parser.add_argument("--loop", choices=["asyncio", "uvloop", "both"], default="asyncio")
    parser.add_argument("--scenarios", metavar="LIST", help="comma list of scenarios (see --list)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes, 1 repetition, no warm-up: a fast smoke run")
    parser.add_argument("--repeats", type=int, help="measurements per scenario and build (default 5; quick 1)")
    parser.add_argument("--warmup", type=int, help="discarded measurements first (default 1; quick 0)")
    parser.add_argument("--budget", type=float, metavar="SECONDS",
                        help="a measurement is the best of the runs that fit in this time "
                             "(default 0.2; quick 0, i.e. one run)")
    parser.add_argument("--json", metavar="FILE", help="write all measurements and ratios as JSON")
    parser.add_argument("--plot", metavar="FILE", help="write a bar chart of the speed-ups (needs matplotlib)")
    parser.add_argument("--report", metavar="JSON",
                        help="measure nothing: print the table (and --plot) from a JSON file "
                             "written by an earlier --json run")
    parser.add_argument("--workflow", metavar="MODULE:FUNCTION",
                        help="benchmark your own workflow: FUNCTION returns a rendered graph or an async "
                             "callable (MODULE is imported from the current directory)")
    parser.add_argument("--workflow-runs", type=int, default=0,
                        help="runs of --workflow per measurement (default: about 0.2 s worth)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds one measurement may take before its worker is killed")
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 5
    if args.warmup is None:
        args.warmup = 0 if args.quick else 1
    if args.budget is None:
        args.budget = 0.0 if args.quick else 0.2
    if args.repeats < 1 or args.warmup < 0:
        parser.error("--repeats must be >= 1 and --warmup >= 0")
    return args


def select_scenarios(args: argparse.Namespace) -> list[str]:
    if not args.scenarios:
        return [] if args.workflow else [n for n, s in S.SCENARIOS.items() if s.kind != "floor"]
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = [n for n in names if n not in S.SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenario(s): {', '.join(unknown)}; see --list")
    return names


def select_builds(args: argparse.Namespace) -> list[Build]:
    keys = ([k.strip() for k in args.builds.split(",") if k.strip()] if args.builds
            else ["compiled", "twin"] + (["ref"] if args.against else []))
    bad = [k for k in keys if k not in BUILD_ORDER]
    if bad:
        raise SystemExit(f"unknown build(s): {', '.join(bad)}; choose from {', '.join(BUILD_ORDER)}")
    if "ref" in keys and not args.against:
        raise SystemExit("the ref build needs --against /path/to/python (a venv with amrita-sense==1.1.3)")
    builds = []
    for key in BUILD_ORDER:
        if key in keys:
            try:
                python = resolve_python(args.against if key == "ref" else args.python)
            except FileNotFoundError as exc:
                raise SystemExit(str(exc)) from None
            builds.append(Build(key, python, _build_env(key)))
    return builds


def list_scenarios() -> str:
    lines = []
    for name, spec in S.SCENARIOS.items():
        extra = f"  [floor: {spec.floor}]" if spec.floor else ""
        lines.append(f"{name:20} {spec.kind:6} size {spec.size:>7} (quick {spec.quick_size:>5})  "
                     f"{spec.title}{extra}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        print(list_scenarios())
        return 0
    if args.report:
        return report(args)
    builds = select_builds(args)
    jobs = plan_jobs(select_scenarios(args), args.workflow, args.quick)
    loops = ["asyncio", "uvloop"] if args.loop == "both" else [args.loop]
    total = len(loops) * len(jobs) * len(builds) * (args.repeats + args.warmup)
    progress = Progress(total)
    progress.note(f"{len(jobs)} scenarios x {len(builds)} builds x {len(loops)} loop(s), "
                  f"{args.repeats} repetition(s) + {args.warmup} warm-up each")
    started = _dt.datetime.now(_dt.timezone.utc)
    results: dict = {}
    build_info: dict = {}
    for loop in loops:
        run_loop(loop, builds, jobs, args, progress, results, build_info)
    rows = []
    for loop in loops:
        available = [b.key for b in builds if build_info.get((loop, b.key), {}).get("status") == "ok"]
        primary = next((k for k in ("compiled", "twin") if k in available), None)
        rows += [analyse(loop, job, results[(loop, job.name)], results, primary) for job in jobs]
    if sys.stderr.isatty():
        sys.stderr.write("\r\033[K")
    _label_reference(builds, build_info)
    print(render_table(rows, builds, _overall_primary(rows)))
    notes = render_notes(rows, builds)
    if notes:
        print("\n" + notes)
    meta = _meta(args, builds, build_info, loops, started)
    if args.json:
        write_json(args.json, rows, meta)
        progress.note(f"JSON written to {args.json}")
    if args.plot:
        progress.note(write_plot(args.plot, rows, builds))
    ours_broken = any(row["builds"][k]["status"] in ("fail", "error")
                      for row in rows for k in ("compiled", "twin") if k in row["builds"])
    return 1 if ours_broken else 0


def report(args: argparse.Namespace) -> int:
    """Re-print the table (and write the chart) of an earlier run from its JSON."""
    try:
        with open(args.report, encoding="utf-8") as handle:
            doc = json.load(handle)
        rows, builds_meta = doc["results"], doc["meta"]["builds"]
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"cannot read {args.report}: {exc}") from None
    builds = [Build(key, meta.get("python", ""), {}, meta.get("label", "")) for key, meta in builds_meta.items()]
    print(render_table(rows, builds, _overall_primary(rows)))
    notes = render_notes(rows, builds)
    if notes:
        print("\n" + notes)
    if args.plot:
        sys.stderr.write(write_plot(args.plot, rows, builds) + "\n")
    return 0


def _overall_primary(rows: list[dict]) -> str | None:
    primaries = [r["primary"] for r in rows if r["primary"]]
    return primaries[0] if primaries else None


def _label_reference(builds: list[Build], build_info: dict) -> None:
    for build in builds:
        infos = [info for (loop, key), info in build_info.items() if key == build.key and info.get("status") == "ok"]
        build.info = infos[0] if infos else {}
        if build.key == "ref" and build.info.get("version"):
            build.label = build.info["version"]


def _meta(args: argparse.Namespace, builds: list[Build], build_info: dict, loops: list[str],
          started: _dt.datetime) -> dict:
    return {
        "command": [sys.executable, "-m", "amrita_sense.bench"] + (sys.argv[1:] if sys.argv else []),
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round((_dt.datetime.now(_dt.timezone.utc) - started).total_seconds(), 1),
        "machine": {"platform": platform.platform(), "machine": platform.machine(),
                    "processor": platform.processor(), "cpu_count": os.cpu_count()},
        "loops": loops, "repeats": args.repeats, "warmup": args.warmup, "budget_s": args.budget,
        "quick": args.quick,
        "builds": {b.key: {"label": b.label, "python": b.python,
                           "per_loop": {loop: build_info.get((loop, b.key)) for loop in loops}}
                   for b in builds},
    }


if __name__ == "__main__":
    sys.exit(main())
