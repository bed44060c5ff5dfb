"""Compare builds of amrita_sense on the benchmark scenarios, side by side.

Each build runs in its own worker process (one per build and event loop):
  compiled  amrita-sense-turbo with the compiled core (AMRITA_SENSE_REQUIRE_EXTENSIONS=1)
  pure      amrita-sense-turbo, the pure build: no compiled core (AMRITA_SENSE_NO_EXTENSIONS=1)
  ref       amrita-sense 1.1.3 under another Python (--against /path/to/venv/bin/python)
  peers     with --peers: LangGraph, pydantic-graph, Burr, LlamaIndex Workflows, DBOS Transact,
            each in its own virtual environment (created on first use under --peers-dir), on the
            peers' work only: a 20-node request chain, a 10-iteration agent loop, an IF/ELSE, a
            retried call, and the durable work: a 10-node chain with a checkpoint after every node
            into SQLite, into Postgres (a throwaway server on loopback) and into files, in each
            durability mode a system has, beside the floor (the store's own writes of the same bytes)
Measurements are interleaved: for every scenario, each repetition visits every
build (in rotating order), so machine noise hits all builds alike. One
measurement is the best of the runs that fit in --budget seconds; the table
quotes the median of the --repeats measurements and the ratios between them.

Examples:
  python -m amrita_sense.bench --quick
  python -m amrita_sense.bench --against .venv-ref/bin/python --loop both --json bench-results.json
  python -m amrita_sense.bench --scenarios sync_chain,while_loop --repeats 9
  python -m amrita_sense.bench --families --against .venv-ref/bin/python --loop both
  python -m amrita_sense.bench --workflow myapp.flows:build_graph --against .venv-ref/bin/python
  python -m amrita_sense.bench --peers --against .venv-ref/bin/python --loop both
  python -m amrita_sense.bench --peers langgraph,burr --quick
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import queue
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from amrita_sense.bench import charts, peers
from amrita_sense.bench import scenarios as S
from amrita_sense.bench import workload as W
from amrita_sense.bench.peers import venvs
from amrita_sense.bench.postgres import throwaway
from amrita_sense.bench.results import LABELS, OLD_BUILD_KEYS, OLD_RATIO_KEYS, _meta, _rename_old_keys

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_worker.py")
BUILD_ORDER = ("compiled", "pure", "ref")
EXPECT = {"compiled": "cython", "pure": "python", "ref": "reference"}

WORKFLOW_PREFIX = "workflow:"


# ---------------------------------------------------------------------------
# Builds and their worker processes


@dataclass
class Build:
    """One column of the table: which Python runs which amrita_sense (or, for a peer, which
    other runtime); `problem` says why it cannot run at all (its environment failed)."""

    key: str
    python: str
    env: dict
    label: str = ""
    info: dict = field(default_factory=dict)
    peer: bool = False
    problem: str = ""
    kinds: tuple = ("peer",)  # a peer's: the kinds of work it runs
    durable: dict | None = None  # the durable work it runs: {work: {mode: how it is written}}; None: not asked yet

    def __post_init__(self) -> None:
        self.label = self.label or LABELS[self.key]

    def worker_args(self) -> list[str]:
        if self.peer:
            return ["--expect", "peer", "--peer", self.key]
        return ["--expect", EXPECT[self.key]]

    def serves(self, job: Job) -> bool:
        """A peer runs the peers' work only (and the durable work, if it has it); the durable work
        runs in the modes the system has (ours: before its worker said which, sync only)."""
        if self.peer and job.kind not in self.kinds:
            return False
        if job.name in DURABLE_FLOORS:  # on our builds that run the durable work
            return not self.peer and (self.durable is None or bool(self.durable))
        if job.kind != "durable":
            return True
        if self.durable is None:
            return job.mode == "sync"
        return job.mode in self.durable.get(job.name, {})


def _build_env(key: str, overrides: dict | None = None) -> dict:
    env = dict(os.environ)
    for name in ("AMRITA_SENSE_NO_EXTENSIONS", "AMRITA_SENSE_REQUIRE_EXTENSIONS"):
        env.pop(name, None)
    if key == "compiled":
        env["AMRITA_SENSE_REQUIRE_EXTENSIONS"] = "1"
    elif key == "pure":
        env["AMRITA_SENSE_NO_EXTENSIONS"] = "1"
    else:  # another environment (the reference, a peer) must not see this one's sources
        env.pop("PYTHONPATH", None)
    env.update(overrides or {})
    env["PYTHONUNBUFFERED"] = "1"
    return env


def parse_against(text: str) -> tuple[str, dict]:
    """`--against "[NAME=VALUE ...] PYTHON"`: the Python, and environment variables for its workers
    (e.g. AMRITA_SENSE_TURBO=0 to compare with the amrita-sense installed beside this package)."""
    words = shlex.split(text)
    overrides = {}
    while len(words) > 1 and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        name, value = words.pop(0).split("=", 1)
        overrides[name] = value
    if len(words) != 1:
        raise SystemExit(f"--against {text!r}: expected [NAME=VALUE ...] PYTHON")
    return words[0], overrides


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
        args = [self.build.python, WORKER, "--loop", self.loop, *self.build.worker_args()]
        for path in self.extra_paths:
            args += ["--path", path]
        self.stderr_file = tempfile.TemporaryFile(mode="w+", encoding="utf-8", errors="replace")
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr_file,
            env=self.build.env,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
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
        stdin = self.proc.stdin
        assert stdin is not None  # started with stdin=PIPE
        try:
            stdin.write(json.dumps(cmd) + "\n")
            stdin.flush()
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
            return {"status": "error", "reason": f"worker exited with code {code}", "traceback": tail}
        return json.loads(line)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                if proc.stdin is not None:
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
    note: str = ""  # how the build set up the work (the durable work: its store's settings)
    parts: list = field(default_factory=list)  # where an operation's time went, per measurement
    comparable: bool = True  # False: this build's node trace differs from the primary build's

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
    family: str | None = None
    mode: str | None = None  # the durable work (and its floor): the durability mode

    @property
    def key(self) -> str:
        """The job's key in the results: its name, and the mode of a durable work."""
        return f"{self.name}@{self.mode}" if self.kind == "durable" else self.name

    @property
    def postgres(self) -> bool:
        """Does it store into the Postgres server?"""
        return self.name in POSTGRES_WORK

    def command(self, workflow_runs: int, budget: float) -> dict:
        if self.name.startswith(WORKFLOW_PREFIX):
            return {
                "op": "workflow",
                "spec": self.name[len(WORKFLOW_PREFIX) :],
                "runs": workflow_runs,
                "budget": budget,
            }
        command = {"op": "run", "scenario": self.name, "size": self.size, "budget": budget}
        if self.mode is not None:
            command["mode"] = self.mode
        return command


DURABLE_FLOORS = {work.floor for work in S.DURABLE_WORKS.values() if work.floor}
POSTGRES_WORK = {
    name for work in S.DURABLE_WORKS.values() if work.store == "postgres" for name in (work.name, work.floor)
}


def is_durable(row: dict) -> bool:
    """A row of the durable table: a durable work in one mode, or its floor."""
    return row["kind"] == "durable" or row["scenario"] in DURABLE_FLOORS


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
        durable = spec.kind == "durable" or name in DURABLE_FLOORS
        for mode in S.DURABLE_MODES if spec.kind == "durable" else ("sync",) if durable else (None,):
            jobs.append(
                Job(
                    name,
                    spec.title,
                    spec.unit,
                    spec.measure,
                    spec.kind,
                    spec.floor,
                    spec.targets,
                    spec.quick_size if quick else spec.size,
                    spec.family,
                    mode,
                )
            )
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

    def clear(self) -> None:
        if self.tty:
            sys.stderr.write("\r\033[K")

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
    cell.note = cell.note or reply.get("note", "")
    if status == "ok":
        cell.status = "ok"
        cell.values.append(reply["value"])
        if reply.get("parts"):
            cell.parts.append(reply["parts"])
        cell.runs.append(reply.get("runs", 1))
        return
    cell.status = status or "error"
    cell.reason = reply.get("reason", "")
    if reply.get("traceback"):
        cell.reason += "\n" + reply["traceback"].rstrip()


def run_loop(
    loop: str,
    builds: list[Build],
    jobs: list[Job],
    args: argparse.Namespace,
    progress: Progress,
    results: dict,
    build_info: dict,
) -> None:
    """Measure every job on every build for one event loop, interleaved."""
    workers: dict[str, WorkerProcess] = {}
    extra_paths = args.workflow_paths
    try:
        for build in builds:
            if build.problem:
                build_info[(loop, build.key)] = {"status": "n/a", "reason": build.problem}
                continue
            worker = WorkerProcess(build, loop, extra_paths)
            hello = worker.start(args.timeout)
            build_info[(loop, build.key)] = hello
            if hello.get("status") == "ok":
                workers[build.key] = worker
                if build.durable is None or not build.peer:  # what it runs of the durable work, as it says
                    build.durable = hello.get("durable") or {}
                progress.note(f"{loop}: {build.label} = {_describe(hello)}")
            else:
                worker.stop()
                progress.note(f"{loop}: {build.label} unavailable: {hello.get('reason')}")
        missing = {
            key: info.get("reason", "unavailable")
            for (lp, key), info in build_info.items()
            if lp == loop and info.get("status") != "ok"
        }
        for job in jobs:
            if job.name.startswith(WORKFLOW_PREFIX):
                ours = [b for b in builds if b.serves(job)]
                results[(loop, job.key)] = compare_traces(loop, job, ours, workers, args, progress)
            _run_job(loop, job, builds, workers, missing, args, progress, results)
    finally:
        for worker in workers.values():
            worker.stop()


def _describe(hello: dict) -> str:
    impl = hello.get("implementation")
    if impl == "peer":
        versions = ", ".join(f"{dist} {v}" for dist, v in hello.get("versions", {}).items())
        return f"{versions}, Python {hello.get('python')} ({hello.get('executable')}); {hello.get('telemetry')}"
    core = f"{impl} core"
    what = f"amrita-sense {hello.get('version')}" if impl == "reference" else f"amrita-sense-turbo ({core})"
    return f"{what}, Python {hello.get('python')} ({hello.get('executable')})"


def _run_job(
    loop: str,
    job: Job,
    builds: list[Build],
    workers: dict,
    missing: dict,
    args: argparse.Namespace,
    progress: Progress,
    results: dict,
) -> None:
    builds = [b for b in builds if b.serves(job)]
    cells = results.setdefault((loop, job.key), {b.key: Cell() for b in builds})
    if not builds:
        return
    order = [b for b in builds if b.key in workers]
    for b in builds:
        if b.key not in workers:
            cells[b.key].status = "n/a"
            cells[b.key].reason = "build unavailable: " + missing.get(b.key, "its worker stopped")
    command = job.command(args.workflow_runs, args.budget)
    postgres = getattr(args, "postgres", None)
    rounds = [("warm-up", True)] * args.warmup + [(f"rep {i + 1}/{args.repeats}", False) for i in range(args.repeats)]
    for index, (label, warmup) in enumerate(rounds):
        rotation = index % len(order) if order else 0
        for build in order[rotation:] + order[:rotation]:
            cell = cells[build.key]
            if cell.status not in ("pending", "ok"):
                progress.step(f"{loop} {job.key} {build.label}: {cell.status}")
                continue
            sent = dict(command, **postgres.fields(build.key)) if job.postgres and postgres is not None else command
            reply = workers[build.key].request(sent, args.timeout)
            if warmup and reply.get("status") == "ok":
                progress.step(f"{loop} {job.key} {build.label} {label}")
                continue
            _record(cell, reply)
            shown = format_value(reply.get("value"), job.measure) if cell.status == "ok" else cell.status
            progress.step(f"{loop} {job.key} {build.label} {label}: {shown}")
            if workers[build.key].proc is None:  # crashed or timed out: start a fresh worker
                _restart(loop, build, workers, args, progress)
    summary = " | ".join(f"{b.label} {_cell_text(cells[b.key], job.measure)}" for b in builds)
    progress.note(f"{loop} {job.key}: {summary}")


def _restart(loop: str, build: Build, workers: dict, args: argparse.Namespace, progress: Progress) -> None:
    old = workers.pop(build.key)
    old.stop()
    worker = WorkerProcess(build, loop, old.extra_paths)
    if worker.start(args.timeout).get("status") == "ok":
        workers[build.key] = worker
    else:
        worker.stop()
        progress.note(f"{loop}: {build.label} could not be restarted")


# ---------------------------------------------------------------------------
# Did the builds do the same work?


def compare_traces(
    loop: str, job: Job, builds: list[Build], workers: dict, args: argparse.Namespace, progress: Progress
) -> dict:
    """Run the workflow once on every build (before anything is timed) and compare the node
    traces with the first build's: a build that ran other nodes is marked not comparable."""
    cells = {b.key: Cell() for b in builds}
    spec = job.name[len(WORKFLOW_PREFIX) :]
    traces = {}
    for build in builds:
        if build.key not in workers:
            continue
        reply = workers[build.key].request({"op": "trace", "spec": spec}, args.timeout)
        if reply.get("status") == "ok":
            traces[build.key] = reply["trace"]
        else:
            _record(cells[build.key], reply)
            progress.note(f"{loop}: {build.label} could not run {spec}: {cells[build.key].reason.splitlines()[0]}")
    if not traces:
        return cells
    labels = {b.key: b.label for b in builds}
    first = next(iter(traces))
    progress.note(f"{loop}: node trace of {spec} on {labels[first]}: {len(traces[first])} entries")
    for key, trace in traces.items():
        diff = describe_difference(labels[first], traces[first], labels[key], trace)
        if diff:
            cells[key].comparable = False
            cells[key].reason = f"not comparable: {diff}"
            progress.note(f"{loop}: {labels[key]} is NOT comparable with {labels[first]} on {spec}:\n{diff}")
    return cells


def describe_difference(name_a: str, a: list, name_b: str, b: list, context: int = 3) -> str:
    """Where two node traces part, with a few entries before it ("" when they are equal)."""
    index = W.first_difference(a, b)
    if index is None:
        return ""
    lo = max(0, index - context)
    width = max(len(name_a), len(name_b))

    def window(name: str, trace: list) -> str:
        shown = [f"#{i} {trace[i]}" for i in range(lo, min(len(trace), index + 2))] or ["(end)"]
        if len(trace) <= index:
            shown.append("(end)")
        return f"    {name:<{width}}  " + " | ".join(shown)

    return (
        f"the builds ran different nodes: {name_a} entered {len(a)} functions, {name_b} {len(b)}; "
        f"the first difference is entry #{index}:\n{window(name_a, a)}\n{window(name_b, b)}"
    )


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
    comparable = {key: cell.comparable for key, cell in cells.items()}

    def ratio(slow: str, fast: str | None) -> float | None:
        if fast is None or not (comparable.get(slow, True) and comparable.get(fast, True)):
            return None
        return _ratio(medians.get(slow), medians.get(fast))

    ratios = {
        "x_floor": x_floor,
        "vs_pure": ratio("pure", "compiled"),
        "vs_ref": ratio("ref", primary),
        "pure_vs_ref": ratio("ref", "pure"),
    }
    if job.kind == "peer":  # every system's time as a multiple of the primary build's
        ratios["x_primary"] = {key: _ratio(medians.get(key), medians.get(primary or "")) for key in cells}
    if job.kind == "durable":  # against ours (the primary build, sync) on the same store, and the floor
        ours = results.get((loop, f"{S.DURABLE_WORKS[job.name].ours_on}@sync"), {}).get(primary or "")
        floor = floors.get(primary or "")
        ratios["x_ours"] = {key: _ratio(medians.get(key), ours.median if ours else None) for key in cells}
        ratios["x_floor"] = {key: _ratio(medians.get(key), floor) for key in cells}
    verdicts = _verdicts(job, medians, ratios, primary)
    return {
        "loop": loop,
        "scenario": job.name,
        "mode": job.mode if job.kind == "durable" else None,
        "title": job.title,
        "unit": job.unit,
        "kind": job.kind,
        "family": job.family,
        "measure": job.measure,
        "size": job.size,
        "floor": job.floor,
        "floor_median": floors.get(primary) if primary else None,
        "builds": {
            key: {
                "status": cell.status,
                "median": cell.median,
                "values": cell.values,
                "runs": cell.runs,
                "reason": cell.reason or None,
                "comparable": cell.comparable,
                **({"note": cell.note} if cell.note else {}),
                **({"parts": _median_parts(cell.parts)} if cell.parts else {}),
            }
            for key, cell in cells.items()
        },
        "ratios": ratios,
        "primary": primary,
        "targets": verdicts,
        "met": _met(verdicts),
    }


def _median_parts(parts: list[dict]) -> dict:
    """Each part's median over the measurements."""
    return {name: statistics.median(p[name] for p in parts if name in p) for name in parts[0]}


def _verdicts(job: Job, medians: dict, ratios: dict, primary: str | None) -> list[dict]:
    out = []
    for target in job.targets:
        actual = None
        if primary == "compiled" or target.metric in ("x_floor", "value"):
            actual = {
                "x_floor": ratios["x_floor"].get("compiled"),
                "vs_ref": ratios["vs_ref"],
                "vs_pure": ratios["vs_pure"],
                "value": medians.get("compiled"),
            }[OLD_RATIO_KEYS.get(target.metric, target.metric)]
        out.append(
            {
                "target": target.describe(job.measure),
                "build": "compiled",
                "actual": actual,
                "met": None if actual is None else target.met(actual),
            }
        )
    if job.kind == "engine" and job.measure == "time" and not job.name.startswith(WORKFLOW_PREFIX):
        actual = ratios["pure_vs_ref"]
        out.append(
            {
                "target": "pure build >=1x vs 1.1.3",
                "build": "pure",
                "actual": actual,
                "met": None if actual is None else actual >= 1,
            }
        )
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


def render_table(rows: list[dict], builds: list[Build], primary: str | None, targets: bool = False) -> str:
    """The table: one section per loop. By default a build's time per operation, the floor
    and the speed-ups; `targets` adds x floor, the pure build vs the reference, the project's own
    targets and the floor rows themselves."""
    labels = {b.key: b.label for b in builds}
    keys = [b.key for b in builds]
    ref = labels.get("ref", "1.1.3")
    columns = [("floor", "floor")]
    columns += [("x floor", "x_floor")] if targets else []
    columns += [(f"vs {labels.get('pure')}", "vs_pure")] if primary == "compiled" and "pure" in keys else []
    columns += [(f"vs {ref}", "vs_ref")] if "ref" in keys else []
    columns += (
        [(f"{labels.get('pure')} vs {ref}", "pure_vs_ref")] if targets and "pure" in keys and "ref" in keys else []
    )
    columns += [("targets met", "met")] if targets else []
    header = ["scenario", "per"] + [labels[k] for k in keys] + [title for title, _ in columns]
    out = []
    rows = [r for r in rows if r["kind"] != "peer"]  # the peers' table has those
    for loop in dict.fromkeys(r["loop"] for r in rows):
        body = [_table_row(r, keys, columns) for r in rows if r["loop"] == loop and r["kind"] != "floor"]
        floors = [_table_row(r, keys, columns) for r in rows if r["loop"] == loop and r["kind"] == "floor"]
        shown_floors = floors if targets or not body else []
        title = f"event loop: {loop}" + (f"   (speed-ups of the {labels[primary]} build)" if primary else "")
        out.append(title)
        out.append(_grid(header, body + shown_floors, split=len(body), text_last=targets))
    return "\n\n".join(out) + "\n\n" + _legend(columns, labels, primary)


def family_verdicts(rows: list[dict]) -> dict:
    """Per (loop, family): its variants' rows with each one's multiple of the family's fastest
    (on the primary build) and its verdicts on the family's targets, and the spread."""
    out: dict = {}
    for row in rows:
        if row.get("family") in S.FAMILIES and row["kind"] != "floor":
            out.setdefault((row["loop"], row["family"]), {"rows": []})["rows"].append(row)
    for (_, name), entry in out.items():
        members = entry["rows"]
        times = [_primary_median(r) for r in members]
        known = [t for t in times if t is not None]
        fastest = min(known) if known else None
        entry["spread"] = _ratio(max(known), fastest) if known else None
        entry["x_fastest"] = [_ratio(t, fastest) for t in times]
        entry["verdicts"] = [
            _family_row_verdicts(S.FAMILIES[name], row, x) for row, x in zip(members, entry["x_fastest"])
        ]
    return out


def _primary_median(row: dict) -> float | None:
    primary = row["primary"]
    return row["builds"].get(primary, {}).get("median") if primary else None


def _family_row_verdicts(family: S.Family, row: dict, x_fastest: float | None) -> list[dict]:
    out = []
    for target in family.targets:
        if target.metric == "x_fastest":
            actual = x_fastest
        else:  # vs_ref: the compiled build's, as for any target
            actual = row["ratios"]["vs_ref"] if row["primary"] == "compiled" else None
        out.append(
            {"target": target.describe(), "actual": actual, "met": None if actual is None else target.met(actual)}
        )
    return out


def render_families(rows: list[dict], builds: list[Build], families: tuple) -> str:
    """The near-variant sweep, one table per loop: a block per family, a row per variant with
    each build's time, its multiple of the family's fastest variant, its speed-up over 1.1.3
    and MISS where a family target is missed; then each family's spread."""
    if not rows:
        return ""
    labels = {b.key: b.label for b in builds}
    keys = [b.key for b in builds]
    ref = labels.get("ref", "1.1.3")
    header = ["family", "variant", "per"] + [labels[k] for k in keys] + ["x fastest"]
    header += [f"vs {ref}"] if "ref" in keys else []
    header.append("targets met")
    verdicts = family_verdicts(rows)
    out = []
    for loop in dict.fromkeys(r["loop"] for r in rows):
        body, summary = [], []
        for name in families:
            entry = verdicts.get((loop, name))
            if entry is None:
                continue
            order = sorted(range(len(entry["rows"])), key=lambda i: _sort_key(entry["x_fastest"][i]))
            for rank, i in enumerate(order):
                row = entry["rows"][i]
                cells = [name if rank == 0 else "", row["scenario"], row["unit"]]
                cells += [_cell_of(row, key) for key in keys]
                cells.append(_fmt_ratio(entry["x_fastest"][i]))
                cells += [_fmt_ratio(row["ratios"]["vs_ref"])] if "ref" in keys else []
                cells.append(_met(entry["verdicts"][i]))
                body.append(cells)
            summary.append(_family_summary(S.FAMILIES[name], entry))
        primary = next((r["primary"] for r in rows if r["loop"] == loop and r["primary"]), None)
        fast = f"   (x fastest and vs {ref}: the {labels[primary]} build)" if primary else ""
        out.append(f"near variants, event loop: {loop}{fast}")
        out.append(_grid(header, body, split=len(body), text_last=True))
        out.append("\n".join(summary))
    legend = (
        "x fastest: the variant's time as a multiple of its family's fastest variant; a family's "
        "targets hold for every variant"
    )
    return "\n\n".join(out) + "\n\n" + legend


def _sort_key(value: float | None) -> float:
    return value if value is not None else float("inf")


def _cell_of(row: dict, key: str) -> str:
    build = row["builds"].get(key)
    if build is None:
        return ""
    return (
        format_value(build["median"], row["measure"]) if build["status"] == "ok" else _STATUS.get(build["status"], "-")
    )


def _family_summary(family: S.Family, entry: dict) -> str:
    spread = entry["spread"]
    bound = next((t for t in family.targets if t.metric == "x_fastest"), None)
    missed = [row["scenario"] for row, v in zip(entry["rows"], entry["verdicts"]) if any(x["met"] is False for x in v)]
    mark = ""
    if bound is not None and spread is not None and not bound.met(spread):
        mark = f"  MISS: slowest/fastest {_fmt_ratio(spread)} (target {bound.op}{bound.bound:g}x)"
    targets = ", ".join(t.describe() for t in family.targets)
    line = f"{family.name} ({family.title}): slowest/fastest {_fmt_ratio(spread)}; targets {targets}{mark}"
    return line + (f"; missed by {', '.join(missed)}" if missed else "")


APP_SPLIT = ("amrita_core_turn", "amrita_core_turn_inline")


def render_app_split(rows: list[dict], builds: list[Build]) -> str:
    """How much of AmritaCore's turn the worker-thread hand-offs take, per build: the turn
    against the same turn with FORCE_NOT_WRAP_TO_ASYNC (every sync node inline)."""
    lines = []
    for loop in dict.fromkeys(r["loop"] for r in rows):
        by_name = {r["scenario"]: r for r in rows if r["loop"] == loop and r["scenario"] in APP_SPLIT}
        if len(by_name) < 2:
            continue
        turn, inline = (by_name[name]["builds"] for name in APP_SPLIT)
        parts = []
        for build in builds:
            t, t_inline = turn.get(build.key, {}).get("median"), inline.get(build.key, {}).get("median")
            if t and t_inline is not None:
                saved = t - t_inline
                sign = "-" if saved < 0 else ""  # the inline turn was the slower (noise)
                parts.append(f"{build.label} {100 * saved / t:.0f}% ({sign}{S.format_seconds(abs(saved))})")
        if parts:
            lines.append(f"  {loop}: " + ", ".join(parts))
    if not lines:
        return ""
    title = (
        "AmritaCore turn, the worker-thread hand-offs' share (amrita_core_turn against "
        "amrita_core_turn_inline: 1 - inline / turn, and the time per turn):"
    )
    return title + "\n" + "\n".join(lines)


SYSTEM_NAMES = {"compiled": "amrita-sense-turbo, compiled", "pure": "amrita-sense-turbo, pure"}


def render_peers(rows: list[dict], builds: list[Build]) -> str:
    """The peers' table, one section per loop: a row per system, per work its time per request
    and that time as a multiple of the primary build's."""
    rows = [r for r in rows if r["kind"] == "peer"]
    if not rows:
        return ""
    works = list(dict.fromkeys(r["scenario"] for r in rows))
    header = ["system", "version"] + [h for work in works for h in (work, "x")]
    out = []
    for loop in dict.fromkeys(r["loop"] for r in rows):
        by_work = {r["scenario"]: r for r in rows if r["loop"] == loop}
        primary = next((r["primary"] for r in by_work.values() if r["primary"]), None)
        shown = [b for b in builds if any(b.key in r["builds"] for r in by_work.values())]
        body = [_peer_row(b, works, by_work) for b in shown]
        fast = dict((b.key, b.label) for b in builds).get(primary or "", "the first")
        out.append(f"peers, event loop: {loop}   (per request; x: times the {fast} build's time)")
        split = sum(1 for b in shown if not b.peer)
        out.append(_grid(header, body, split=split))
    titles = "; ".join(f"{work}: {S.PEER_WORKS[work].title}" for work in works if work in S.PEER_WORKS)
    notes = "each request a new run (interpreter, graph run, application) with its result checked"
    return "\n\n".join(out) + f"\n\n{titles}\n{notes}"


STORE_TITLES = {"sqlite": "SQLite", "postgres": "Postgres", "file": "file"}


def render_durable(rows: list[dict], builds: list[Build]) -> str:
    """The durable table, one section per loop: a row per system and durability mode, per store
    its time per request, that time as a multiple of ours (the primary build, sync, on the same
    store) and of the floor (the store's own writes of the same bytes); the floor last. Then how
    each system set its store up (the notes the workers sent)."""
    rows = [r for r in rows if is_durable(r)]
    if not rows:
        return ""
    works = [w for w in S.DURABLE_WORKS if any(r["scenario"] == w for r in rows)]
    header = ["system", "durability", "version"]
    for work in works:
        store = STORE_TITLES[S.DURABLE_WORKS[work].store]
        header += [store, "x ours"] + (["x floor"] if S.DURABLE_WORKS[work].floor else [])
    out: list[str] = []
    notes: dict[str, None] = {}
    for loop in dict.fromkeys(r["loop"] for r in rows):
        mine = [r for r in rows if r["loop"] == loop]
        by_key = {(r["scenario"], r.get("mode")): r for r in mine}
        primary = next((r["primary"] for r in mine if r["primary"]), None)
        body = []
        for build in builds:
            for mode in S.DURABLE_MODES:
                cells = [by_key.get((work, mode), {}).get("builds", {}).get(build.key) for work in works]
                if not any(cells):
                    continue
                how = next((m[mode] for m in (build.durable or {}).values() if mode in m), mode)
                line = [_system_name(build), how, str(build.info.get("version") or "")]
                for work, cell in zip(works, cells):
                    row = by_key.get((work, mode), {"ratios": {}})
                    line += _durable_cells(work, cell, row, build.key)
                    if cell and cell.get("note"):
                        notes.setdefault(cell["note"], None)
                body.append(line)
        floor_line = ["floor", "the store's own writes", ""]
        floors = 0
        for work in works:
            floor = S.DURABLE_WORKS[work].floor
            cell = by_key.get((floor, None), {}).get("builds", {}).get(primary or "") if floor else None
            floors += cell is not None
            if cell and cell.get("note"):
                notes.setdefault(cell["note"], None)
            shown = "" if cell is None else _cell_of({"builds": {"f": cell}, "measure": "time"}, "f")
            floor_line += [shown, ""] + (["1.00x" if cell and cell["status"] == "ok" else ""] if floor else [])
        split = len(body)
        if floors:
            body.append(floor_line)
        fast = dict((b.key, b.label) for b in builds).get(primary or "", "ours")
        out.append(
            f"durable work, event loop: {loop}   (per request; x ours: times ours ({fast} build, sync) on "
            "the same store; x floor: times the floor's)"
        )
        out.append(_grid(header, body, split=split))
        out += _durable_parts(mine, builds, works)
    titles = "; ".join(f"{work}: {S.DURABLE_WORKS[work].title}" for work in works)
    legend = (
        "each request a new run with its own id, a checkpoint after every node; every result checked, and the "
        "last request's stored state read back through the system's own API and checked. The file column "
        "(pydantic-graph's file persistence) is compared with ours on SQLite. The floor: as many plain upserts "
        "of our run's snapshot bytes as it saves, each its own commit, on a plain connection with the store's "
        "settings"
    )
    how = "\n".join(f"  {note}" for note in notes)
    return "\n\n".join(out) + f"\n\n{titles}\n{legend}" + (f"\nhow each store was set up:\n{how}" if how else "")


def _durable_parts(rows: list[dict], builds: list[Build], works: list[str]) -> list[str]:
    """Where a request of ours goes (sync), per store: the engine, encoding, writing."""
    lines = []
    for build in builds:
        per_store = []
        for work in works:
            row = next((r for r in rows if r["scenario"] == work and r.get("mode") == "sync"), None)
            parts = ((row or {}).get("builds", {}).get(build.key) or {}).get("parts")
            if parts:
                shown = " + ".join(f"{name} {S.format_seconds(parts[name])}" for name in ("engine", "encode", "write"))
                per_store.append(f"{STORE_TITLES[S.DURABLE_WORKS[work].store]}: {shown}")
        if per_store:
            lines.append(f"  {_system_name(build)}: " + "; ".join(per_store))
    if not lines:
        return []
    title = (
        "where a request of ours goes (sync; medians of a few more requests after each measurement): engine = "
        "the same request without checkpoints, write = time in the store's save, encode = the rest"
    )
    return [title + "\n" + "\n".join(lines)]


def _durable_cells(work: str, cell: dict | None, row: dict, key: str) -> list[str]:
    has_floor = bool(S.DURABLE_WORKS[work].floor)
    if cell is None:
        return ["", ""] + ([""] if has_floor else [])
    shown = format_value(cell["median"], "time") if cell["status"] == "ok" else _STATUS.get(cell["status"], "-")
    ratios = row.get("ratios", {})
    line = [shown, _fmt_ratio(ratios.get("x_ours", {}).get(key))]
    return line + ([_fmt_ratio(ratios.get("x_floor", {}).get(key))] if has_floor else [])


def _peer_row(build: Build, works: list[str], by_work: dict) -> list[str]:
    version = build.info.get("version") or ""
    cells = [_system_name(build), str(version)]
    for work in works:
        row = by_work.get(work) or {"builds": {}}
        cell = row["builds"].get(build.key)
        if cell is None:
            cells += ["", ""]
            continue
        shown = format_value(cell["median"], "time") if cell["status"] == "ok" else _STATUS.get(cell["status"], "-")
        cells += [shown, _fmt_ratio(row["ratios"].get("x_primary", {}).get(build.key))]
    return cells


_STATUS = {"n/a": "n/a", "fail": "FAIL", "error": "ERR"}


def _system_name(build: Build) -> str:
    if build.peer:
        return build.label
    if build.key == "ref":  # amrita-sense itself, or another build of this package (--against)
        return "amrita-sense" if build.info.get("implementation") in (None, "reference") else f"ref: {build.label}"
    return SYSTEM_NAMES.get(build.key, build.label)


def _legend(columns: list[tuple], labels: dict, primary: str | None) -> str:
    lines = [
        "per: the unit one time is for (a node, a loop iteration, a run of your workflow...)",
        "floor: the same function bodies without the engine (a plain Python loop, await, try/except)",
    ]
    if any(kind in ("vs_pure", "vs_ref") for _, kind in columns):
        fast = labels.get(primary, "first") if primary else "first"
        lines.append(f"vs X: how many times faster the {fast} build is than X (higher is better)")
        lines.append("n/c: not comparable, the builds ran different nodes (see the notes)")
    return "\n".join(lines)


_SLOWER = {"vs_pure": "pure", "vs_ref": "ref", "pure_vs_ref": "ref"}


def _table_row(row: dict, keys: list[str], columns: list[tuple]) -> list[str]:
    measure = row["measure"]
    cells = [_short_name(row["scenario"]), row["unit"]]
    for key in keys:
        build = row["builds"][key]
        cells.append(
            format_value(build["median"], measure)
            if build["status"] == "ok"
            else {"n/a": "n/a", "fail": "FAIL", "error": "ERR"}.get(build["status"], "-")
        )
    primary = row["primary"]
    for _, kind in columns:
        if kind == "floor":
            cells.append(format_value(row["floor_median"], "time") if row["floor"] else "")
        elif kind == "x_floor":
            cells.append(_fmt_ratio(row["ratios"]["x_floor"].get(primary)) if row["floor"] and primary else "")
        elif kind == "met":
            cells.append(row["met"] if row["kind"] != "floor" else "")
        elif row["builds"].get(_SLOWER[kind], {}).get("comparable", True):
            cells.append(_fmt_ratio(row["ratios"][kind]))
        else:
            cells.append("n/c")
    return cells


def _short_name(scenario: str) -> str:
    """A workflow given as path/to/file.py:factory shows as file.py:factory."""
    if not scenario.startswith(WORKFLOW_PREFIX):
        return scenario
    target, _, attr = scenario[len(WORKFLOW_PREFIX) :].rpartition(":")
    return f"{WORKFLOW_PREFIX}{os.path.basename(target) if W.is_file_target(target) else target}:{attr}"


def _grid(header: list[str], body: list[list[str]], split: int, text_last: bool = False) -> str:
    widths = [max(len(str(r[i])) for r in [header] + body) for i in range(len(header))]
    numeric = set(range(2, len(header) - (1 if text_last else 0)))

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
                where[f"{row['scenario']}{'@' + row['mode'] if row.get('mode') else ''}@{row['loop']}"] = None
    lines = []
    for (status, reason), (who, where) in seen.items():
        lines.append(f"  {status.upper()} on {', '.join(who)}: {reason}\n      in {', '.join(where)}")
    for row in rows:
        for key, build in row["builds"].items():
            if not build.get("comparable", True):
                lines.append(
                    f"  NOT COMPARABLE on {labels.get(key, key)} ({row['scenario']}@{row['loop']}): "
                    + (build["reason"] or "").removeprefix("not comparable: ")
                )
    return "notes:\n" + "\n".join(lines) if lines else ""


# ---------------------------------------------------------------------------
# Outputs: JSON and chart


def write_json(path: str, rows: list[dict], meta: dict) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump({"schema": 1, "meta": meta, "results": rows}, handle, indent=2, default=str)
        handle.write("\n")


# ---------------------------------------------------------------------------
# --profile-nodes


def profile_nodes(args: argparse.Namespace, builds: list[Build], loops: list[str]) -> int:
    """Profile the workflow on every build and loop, one fresh worker each; print the tables."""
    started = _dt.datetime.now(_dt.timezone.utc)
    progress = Progress(len(builds) * len(loops))
    profiles: list[dict] = []
    build_info: dict = {}
    for loop in loops:
        for build in builds:
            profiles.append(_profile_one(build, loop, args, progress, build_info))
    progress.clear()
    _label_builds(builds, build_info)
    labels = {b.key: b.label for b in builds}
    for profile in profiles:
        profile["title"] = f"{labels[profile['build']]} ({profile['loop']})"
        print(render_profile(profile, args.workflow) + "\n")
    meta = _meta(args, builds, build_info, loops, started)
    if args.json:
        write_json(args.json, profiles, meta)
        progress.note(f"JSON written to {args.json}")
    if args.plot:
        progress.note(charts.node_profile(args.plot, profiles, meta))
    ours = [p for p in profiles if p["build"] in ("compiled", "pure")]
    return 1 if any(p["status"] in ("fail", "error") for p in ours) else 0


def _profile_one(build: Build, loop: str, args: argparse.Namespace, progress: Progress, build_info: dict) -> dict:
    worker = WorkerProcess(build, loop, args.workflow_paths)
    try:
        hello = worker.start(args.timeout)
        build_info[(loop, build.key)] = hello
        if hello.get("status") != "ok":
            reply = hello
        else:
            command = {
                "op": "profile",
                "spec": args.workflow,
                "runs": args.workflow_runs,
                "seconds": 0.2 if args.quick else 1.0,
            }
            reply = worker.request(command, args.timeout)
    finally:
        worker.stop()
    progress.step(f"{loop} {build.label}: {reply.get('status')}")
    return {"build": build.key, "loop": loop, **reply}


def render_profile(profile: dict, spec: str) -> str:
    """One build's profile: per node function, calls, body and engine time per run, share."""
    title = f"node profile of {spec} on {profile['title']}"
    if profile.get("status") != "ok":
        return f"{title}: {profile.get('status', 'error').upper()}: {profile.get('reason', '')}"
    rows = sorted(profile["rows"], key=lambda r: r["body_s"] + r["engine_s"], reverse=True)
    accounted = sum(r["body_s"] + r["engine_s"] for r in rows) + profile["after_s"]
    body = [
        [
            r["label"],
            f"{r['calls']:.3g}",
            S.format_seconds(r["body_s"]),
            S.format_seconds(r["engine_s"]),
            _share(r["body_s"] + r["engine_s"], accounted),
        ]
        for r in rows
    ]
    body.append(
        [
            "(engine, after the last node)",
            "",
            "",
            S.format_seconds(profile["after_s"]),
            _share(profile["after_s"], accounted),
        ]
    )
    engine = sum(r["engine_s"] for r in rows) + profile["after_s"]
    header = ["node function (file:line)", "calls", "body", "engine", "share"]
    summary = (
        f"{title}\none run: {S.format_seconds(profile['run_s'])} without the profiler; "
        f"{S.format_seconds(accounted)} accounted, of which the engine {_share(engine, accounted)} "
        f"(per run, over {profile['runs']} profiled runs; the profiler's own cost, "
        f"{S.format_seconds(profile['event_cost_s'])} per event, is taken out)"
    )
    return summary + "\n" + _grid(header, body, split=len(body) - 1, text_last=False)


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "-"


# ---------------------------------------------------------------------------
# Command line


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m amrita_sense.bench",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--against",
        metavar="PYTHON",
        help="another environment to compare with: a Python (or venv directory) with "
        "amrita-sense==1.1.3, or with another build of this package; environment "
        "variables for it may come first: --against 'AMRITA_SENSE_TURBO=0 .venv/bin/python'",
    )
    parser.add_argument(
        "--python",
        metavar="PYTHON",
        default=sys.executable,
        help="the Python that runs this project's builds (default: this one)",
    )
    parser.add_argument(
        "--builds",
        metavar="LIST",
        help="comma list of compiled,pure,ref (default: compiled,pure, plus ref with --against)",
    )
    parser.add_argument(
        "--peers",
        metavar="LIST",
        nargs="?",
        const="all",
        help="compare with other runtimes on the peers' work (peer_chain, peer_agent, peer_if_else): "
        f"all, or a comma list of {', '.join(peers.PEERS)}; each runs in its own virtual environment, "
        "created with pip on first use (pins: amrita_sense/bench/peers/__init__.py). Without "
        "--scenarios only the peers' work runs",
    )
    parser.add_argument(
        "--peers-dir",
        metavar="DIR",
        default=".venv-peers",
        help="where the peers' environments are kept (default: .venv-peers in the current directory)",
    )
    parser.add_argument("--peers-rebuild", action="store_true", help="re-create the peers' environments first")
    parser.add_argument(
        "--postgres-url",
        metavar="URL",
        help="the durable work's Postgres server (postgresql://user[:password]@host[:port]/dbname; every "
        "system's tables in that database) instead of a throwaway one started on loopback from the "
        "server binaries found (initdb, pg_ctl); without either, the Postgres work reads n/a",
    )
    parser.add_argument("--loop", choices=["asyncio", "uvloop", "both"], default="asyncio")
    parser.add_argument("--scenarios", metavar="LIST", help="comma list of scenarios (see --list)")
    parser.add_argument(
        "--families",
        metavar="LIST",
        nargs="?",
        const="all",
        help="the near-variant sweep: every variant of these families (all, or a comma list of "
        f"{', '.join(S.FAMILIES)}), and a table per family: each variant's time, its multiple of the "
        "family's fastest and its speed-up over 1.1.3, against the family's targets. Without "
        "--scenarios only the families run",
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--quick", action="store_true", help="small sizes, 1 repetition, no warm-up: a fast smoke run")
    parser.add_argument("--repeats", type=int, help="measurements per scenario and build (default 5; quick 1)")
    parser.add_argument("--warmup", type=int, help="discarded measurements first (default 1; quick 0)")
    parser.add_argument(
        "--budget",
        type=float,
        metavar="SECONDS",
        help="a measurement is the best of the runs that fit in this time (default 0.2; quick 0, i.e. one run)",
    )
    parser.add_argument("--json", metavar="FILE", help="write all measurements and ratios as JSON")
    parser.add_argument(
        "--plot",
        metavar="FILE",
        help="write a chart (PNG, SVG, PDF): the speed-ups, or with --profile-nodes the "
        "profile (needs matplotlib: pip install 'amrita-sense-turbo[plot]')",
    )
    parser.add_argument(
        "--targets",
        action="store_true",
        help="also show this project's own performance targets, x floor and the floor rows",
    )
    parser.add_argument(
        "--report",
        metavar="JSON",
        help="measure nothing: print the table (and --plot) from a JSON file written by an earlier --json run",
    )
    parser.add_argument(
        "--workflow",
        metavar="SPEC",
        help="benchmark your own workflow: module:factory or path/to/file.py:factory, where "
        "factory() returns a graph (each run: a new WorkflowInterpreter) or an async "
        "callable (each run: one call); the module is found as this Python finds it "
        "(current directory, PYTHONPATH, the environment) and loaded by every build",
    )
    parser.add_argument(
        "--profile-nodes",
        action="store_true",
        help="with --workflow: where a run's time goes, per node function: its own body and "
        "the engine's overhead before it, on each build (a table; a chart with --plot)",
    )
    parser.add_argument(
        "--workflow-runs", type=int, default=0, help="runs of --workflow per measurement (default: about 0.2 s worth)"
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="seconds one measurement may take before its worker is killed"
    )
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = 1 if args.quick else 5
    if args.warmup is None:
        args.warmup = 0 if args.quick else 1
    if args.budget is None:
        args.budget = 0.0 if args.quick else 0.2
    if args.repeats < 1 or args.warmup < 0:
        parser.error("--repeats must be >= 1 and --warmup >= 0")
    if args.profile_nodes and not args.workflow:
        parser.error("--profile-nodes profiles your workflow: give --workflow module:factory")
    args.family_list = ()
    if args.families is not None:
        try:
            args.family_list = select_families(args.families)
        except ValueError as exc:
            parser.error(str(exc))
    args.peer_list = ()
    if args.peers is not None:
        if args.profile_nodes:
            parser.error("--profile-nodes profiles your workflow on this project's builds: drop --peers")
        try:
            args.peer_list = peers.select(args.peers)
        except ValueError as exc:
            parser.error(str(exc))
    if args.plot:
        problem = charts.plot_problem(args.plot)
        if problem:
            parser.exit(2, f"{parser.prog}: {problem}\n")
    args.workflow_paths = []
    if args.workflow:
        try:
            args.workflow, args.workflow_paths = W.resolve(args.workflow)
        except W.WorkflowError as exc:
            parser.exit(2, f"{parser.prog}: {exc}\n")
    return args


def select_families(text: str) -> tuple[str, ...]:
    """`--families all` or a comma list of family names."""
    if text == "all":
        return tuple(S.FAMILIES)
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in S.FAMILIES]
    if unknown or not names:
        raise ValueError(
            f"--families: unknown {', '.join(unknown) or 'list'}; choose all or from {', '.join(S.FAMILIES)}"
        )
    return names


def select_scenarios(args: argparse.Namespace) -> list[str]:
    """The chosen scenarios (by default all but the floors, the near variants, the peers' work
    and the durable work), then, with --families, those families' variants, and with --peers,
    the peers' work and the durable work (unless --scenarios names some of those: then only them)."""
    peer_work = list(S.PEER_WORKS) + list(S.DURABLE_WORKS) if args.peer_list else []
    variants = [n for n, s in S.SCENARIOS.items() if s.family in args.family_list]
    if not args.scenarios:
        if args.workflow or peer_work or variants:
            return list(dict.fromkeys(variants + peer_work))
        return [n for n, s in S.SCENARIOS.items() if s.kind not in ("floor", "peer", "durable", "variant")]
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = [n for n in names if n not in S.SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenario(s): {', '.join(unknown)}; see --list")
    if any(n in peer_work for n in names):  # the peers' works named: those only
        peer_work = []
    return list(dict.fromkeys(names + variants + peer_work))


def select_builds(args: argparse.Namespace) -> list[Build]:
    keys = (
        [_current_build_key(k.strip()) for k in args.builds.split(",") if k.strip()]
        if args.builds
        else ["compiled", "pure"] + (["ref"] if args.against else [])
    )
    bad = [k for k in keys if k not in BUILD_ORDER]
    if bad:
        raise SystemExit(f"unknown build(s): {', '.join(bad)}; choose from {', '.join(BUILD_ORDER)}")
    if "ref" in keys and not args.against:
        raise SystemExit("the ref build needs --against /path/to/python (a venv with amrita-sense==1.1.3)")
    against, overrides = parse_against(args.against) if args.against else ("", {})
    builds = []
    for key in BUILD_ORDER:
        if key in keys:
            try:
                python = resolve_python(against if key == "ref" else args.python)
            except FileNotFoundError as exc:
                raise SystemExit(str(exc)) from None
            builds.append(Build(key, python, _build_env(key, overrides if key == "ref" else None)))
    return builds


def _current_build_key(key: str) -> str:
    """A build named by its old key (`--builds twin`) still selects it, with a note."""
    if key not in OLD_BUILD_KEYS:
        return key
    sys.stderr.write(f"--builds: {key!r} is now called {OLD_BUILD_KEYS[key]!r}; the old name will go\n")
    return OLD_BUILD_KEYS[key]


def peer_builds(args: argparse.Namespace, say: Any) -> list[Build]:
    """A column per chosen peer, its environment made ready first (one that cannot be made is
    kept as a column that says why)."""
    out = []
    for peer in args.peer_list:
        python, problem = "", ""
        try:
            python = venvs.ensure(peer, os.path.abspath(args.peers_dir), args.python, args.peers_rebuild, say)
        except (venvs.PeerEnvError, OSError, subprocess.CalledProcessError) as exc:
            problem = f"its environment could not be made: {exc}"
            say(f"{peer.label} unavailable: {problem}")
        build = Build(peer.name, python, _build_env("peer"), peer.label, peer=True, problem=problem)
        build.kinds = peer.kinds
        build.durable = _written_durable(peer) if "durable" in peer.kinds else {}
        out.append(build)
    return out


def _written_durable(peer: peers.Peer) -> dict:
    """The durable work `peer`'s module writes ({work: {mode: how}}), read without its library."""
    import importlib

    module = importlib.import_module(f"amrita_sense.bench.peers.{peer.module}")
    return {work: dict(modes) for work, modes in getattr(module, "DURABLE", {}).items()}


def list_scenarios() -> str:
    lines = []
    for name, spec in S.SCENARIOS.items():
        extra = f"  [floor: {spec.floor}]" if spec.floor else ""
        extra += f"  [family: {spec.family}]" if spec.family else ""
        lines.append(f"{name:25} {spec.kind:7} size {spec.size:>7} (quick {spec.quick_size:>5})  {spec.title}{extra}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        print(list_scenarios())
        return 0
    if args.report:
        return report(args)
    builds = select_builds(args)
    loops = ["asyncio", "uvloop"] if args.loop == "both" else [args.loop]
    if args.profile_nodes:
        return profile_nodes(args, builds, loops)
    jobs = plan_jobs(select_scenarios(args), args.workflow, args.quick)
    builds += peer_builds(args, lambda text: sys.stderr.write(f"peers: {text}\n"))
    visits = sum(1 for job in jobs for build in builds if _will_serve(build, job))
    total = len(loops) * visits * (args.repeats + args.warmup)
    progress = Progress(total)
    progress.note(
        f"{len(jobs)} scenarios x {len(builds)} builds x {len(loops)} loop(s), "
        f"{args.repeats} repetition(s) + {args.warmup} warm-up each"
    )
    started = _dt.datetime.now(_dt.timezone.utc)
    results: dict = {}
    build_info: dict = {}
    with postgres_server(args, any(job.postgres for job in jobs), progress.note) as args.postgres:
        for loop in loops:
            run_loop(loop, builds, jobs, args, progress, results, build_info)
    rows = []
    for loop in loops:
        primary = _primary(loop, builds, build_info)
        measured = [job for job in jobs if results.get((loop, job.key))]  # a mode no system has: no row
        rows += [analyse(loop, job, results[(loop, job.key)], results, primary) for job in measured]
    progress.clear()
    _label_builds(builds, build_info)
    meta = _meta(args, builds, build_info, loops, started)
    _print_results(rows, builds, args.targets, args.family_list)
    if args.json:
        write_json(args.json, rows, meta)
        progress.note(f"JSON written to {args.json}")
    if args.plot:
        progress.note(charts.speedups(args.plot, rows, meta))
    return 1 if broken(rows, builds) else 0


class PostgresServer:
    """Where the durable work stores in Postgres: a database per build on the runner's throwaway
    cluster, or the server `--postgres-url` names (one database for all), or why there is none."""

    def __init__(self, cluster: Any = None, url: str = "", problem: str = "") -> None:
        self.cluster, self.url, self.problem = cluster, url, problem
        self.servers: dict[str, dict] = {}

    def fields(self, key: str) -> dict:
        """What a worker's command carries for build `key`: its server, or why there is none."""
        if self.problem:
            return {"postgres_problem": self.problem}
        if key not in self.servers:
            try:
                self.servers[key] = self._server(key)
            except (OSError, RuntimeError, subprocess.SubprocessError, ValueError) as exc:
                return {"postgres_problem": f"no database for it on the Postgres server: {exc}"}
        return {"postgres": self.servers[key]}

    def _server(self, key: str) -> dict:
        if self.cluster is not None:
            dbname = "bench_" + "".join(c if c.isalnum() else "_" for c in key)
            self.cluster.createdb(dbname)
            host, port, user, password = "127.0.0.1", self.cluster.port, "postgres", ""
        else:
            from urllib.parse import unquote, urlsplit

            parts = urlsplit(self.url)
            if parts.scheme not in ("postgres", "postgresql") or not parts.path.strip("/"):
                raise ValueError(
                    f"--postgres-url: expected postgresql://user[:password]@host[:port]/dbname, not {self.url!r}"
                )
            host, port = parts.hostname or "127.0.0.1", parts.port or 5432
            user, password = unquote(parts.username or "postgres"), unquote(parts.password or "")
            dbname = parts.path.strip("/")
        auth = user + (f":{password}" if password else "")
        dsn = f"host={host} port={port} user={user} dbname={dbname}" + (f" password={password}" if password else "")
        url = f"postgresql://{auth}@{host}:{port}/{dbname}"
        return {
            "dsn": dsn,
            "url": url,
            "host": host,
            "port": port,
            "user": user,
            "password": password,
            "dbname": dbname,
        }


@contextlib.contextmanager
def postgres_server(args: argparse.Namespace, wanted: bool, say: Any) -> Iterator[PostgresServer | None]:
    """The durable work's Postgres server for the run (`wanted`: a job stores there): the one
    --postgres-url names, else a throwaway cluster on loopback, removed at the end; without
    server binaries, a server that says why (its cells read n/a)."""
    if not wanted:
        yield None
        return
    if args.postgres_url:
        yield PostgresServer(url=args.postgres_url)
        return
    with throwaway() as (cluster, problem):
        if cluster is None:
            say(f"Postgres: {problem}; the Postgres work reads n/a")
        else:
            say(f"Postgres: a throwaway server on 127.0.0.1:{cluster.port} ({cluster.bindir}), a database per system")
        yield PostgresServer(cluster, problem=problem)


def _will_serve(build: Build, job: Job) -> bool:
    """`build.serves(job)` as it will be once the build's worker said what it runs (for the
    progress count: our builds' durability modes as this environment's build has them)."""
    if build.peer or build.durable is not None or (job.kind != "durable" and job.name not in DURABLE_FLOORS):
        return build.serves(job)
    if build.key == "ref":
        return False
    return job.name in DURABLE_FLOORS or job.mode in S.durable_systems().get(job.name, {})


def broken(rows: list[dict], builds: list[Build]) -> bool:
    """Did our builds, or a peer (its version of the work is ours too), fail or crash anywhere?"""
    checked = ["compiled", "pure"] + [b.key for b in builds if b.peer]
    return any(row["builds"][k]["status"] in ("fail", "error") for row in rows for k in checked if k in row["builds"])


def _primary(loop: str, builds: list[Build], build_info: dict) -> str | None:
    available = [b.key for b in builds if build_info.get((loop, b.key), {}).get("status") == "ok"]
    return next((k for k in ("compiled", "pure") if k in available), None)


def _print_results(rows: list[dict], builds: list[Build], targets: bool, families: tuple = ()) -> None:
    ours = [b for b in builds if not b.peer]
    in_view = [r for r in rows if r.get("family") in families]
    rest = [r for r in rows if r.get("family") not in families and not is_durable(r)]
    shown = any(r["kind"] not in ("peer", "floor") for r in rest) or not in_view
    main = (
        render_table(rest, ours, _overall_primary(rows), targets)
        if shown and any(r["kind"] != "peer" for r in rest)
        else ""
    )
    parts = [
        main,
        render_app_split(rows, ours),
        render_families(in_view, ours, families),
        render_peers(rows, builds),
        render_durable(rows, builds),
        render_peer_versions(builds),
        render_notes(rows, builds),
    ]
    print("\n\n".join(part for part in parts if part))


def report(args: argparse.Namespace) -> int:
    """Re-print the table (and write the chart) of an earlier run from its JSON."""
    try:
        with open(args.report, encoding="utf-8") as handle:
            doc = json.load(handle)
        rows, meta = doc["results"], doc["meta"]
        _rename_old_keys(rows, meta)
        builds = [
            Build(
                key,
                b.get("python", ""),
                {},
                b.get("label", ""),
                info=b,
                peer=bool(b.get("peer")),
                kinds=tuple(b.get("kinds") or ("peer",)),
                durable=b.get("durable"),
            )
            for key, b in meta["builds"].items()
        ]
    except (OSError, ValueError, KeyError) as exc:
        raise SystemExit(f"cannot read {args.report}: {exc}") from None
    _print_results(rows, builds, args.targets, tuple(meta.get("families") or ()))
    if args.plot:
        sys.stderr.write(charts.speedups(args.plot, rows, meta) + "\n")
    return 0


def _overall_primary(rows: list[dict]) -> str | None:
    primaries = [r["primary"] for r in rows if r["primary"]]
    return primaries[0] if primaries else None


def _label_builds(builds: list[Build], build_info: dict) -> None:
    """Keep each build's description; the reference column is named after what it runs."""
    for build in builds:
        infos = [info for (loop, key), info in build_info.items() if key == build.key and info.get("status") == "ok"]
        build.info = infos[0] if infos else {}
        if build.key == "ref" and build.info.get("version"):
            impl = build.info.get("implementation")
            build.label = build.info["version"] + ("" if impl == "reference" else f" {impl}")


def render_peer_versions(builds: list[Build]) -> str:
    """What each peer ran: its pinned requirements' versions and how its telemetry stood."""
    if not any(build.peer for build in builds):
        return ""
    lines = ["peers measured (pinned in amrita_sense/bench/peers/__init__.py):"]
    for build in builds:
        if not build.peer:
            continue
        versions = ", ".join(f"{dist} {v}" for dist, v in (build.info.get("versions") or {}).items())
        what = f"{versions}; {build.info.get('telemetry')}" if versions else "not measured"
        lines.append(f"  {build.label}: {what}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
