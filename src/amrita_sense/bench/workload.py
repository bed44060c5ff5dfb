"""A user's workflow as the benchmark tools run it.

`--workflow SPEC` names a factory: `package.module:factory` (a module found on the
runner's `sys.path`: the current directory, `PYTHONPATH`, the environment) or
`path/to/file.py:factory`. The factory returns a graph (rendered, a compose or a
self-compiling instruction: run by a fresh `WorkflowInterpreter` each time, as an
application runs a request) or an async callable (awaited once per run).

The runner resolves SPEC in its own environment (`resolve`) and hands every worker
the directory to import it from, so each build, a 1.1.3 reference in another
environment included, loads the same file. Inside a worker, `NodeRecorder` watches
which of the user's functions the engine enters during a run: the node trace that
the runner compares across builds, and the per-node profile (`profile_runs`).

This module uses only the standard library and the public API of amrita-sense 1.1.3:
workers load it by path, under any build.
"""

import dis
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import sysconfig
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

TRACE_LIMIT = 100_000  # node entries kept per trace (a longer run compares its first entries)
PROFILE_LIMIT = 1_000_000  # node entries kept while profiling (no new run starts past half of it)


class WorkflowError(Exception):
    """SPEC cannot be resolved or loaded, or its factory made something that cannot run."""


class NothingRan(AssertionError):
    """The workflow ran without entering any of the user's functions."""


# ---------------------------------------------------------------------------
# Resolving and loading SPEC


def split_spec(spec: str) -> Tuple[str, str]:
    """("package.module" or "path/to/file.py", "factory") from SPEC."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr or not all(part.isidentifier() for part in attr.split(".")):
        raise WorkflowError(f"expected module:factory or path/to/file.py:factory, got {spec!r}")
    return target, attr


def is_file_target(target: str) -> bool:
    return target.endswith(".py") or os.sep in target or (os.altsep or os.sep) in target


def resolve(spec: str) -> Tuple[str, List[str]]:
    """SPEC with an absolute file path, and the directories a worker must import it from.

    Runs in the runner's environment, so a module is found where `python -m` would find
    it: the current directory first (also for the console script), then `sys.path`.
    """
    target, attr = split_spec(spec)
    if is_file_target(target):
        path = os.path.abspath(target)
        if not os.path.isfile(path):
            raise WorkflowError(f"--workflow {spec}: no such file {path}")
        return f"{path}:{attr}", [os.path.dirname(path)]
    top = target.split(".")[0]
    try:
        # The current directory first, as `python -m` has it (a console script's sys.path does not).
        found = importlib.machinery.PathFinder.find_spec(top, [os.getcwd()]) or importlib.util.find_spec(top)
    except (ImportError, ValueError) as exc:
        raise WorkflowError(f"--workflow {spec}: cannot look up {top!r}: {exc}") from None
    if found is None or not found.origin or found.origin in ("built-in", "frozen"):
        where = os.getcwd()
        raise WorkflowError(
            f"--workflow {spec}: no module {top!r} on this Python's path (searched from {where}; "
            "set PYTHONPATH, or give path/to/file.py:factory)"
        )
    return spec, [_import_root(found)]


def _import_root(found: Any) -> str:
    """The sys.path entry that holds the top-level module or package `found`."""
    location = found.origin if not found.submodule_search_locations else os.path.dirname(found.origin)
    return os.path.dirname(os.path.abspath(location))


def add_import_paths(paths: List[str]) -> None:
    """Put the user's directories first on sys.path (after `amrita_sense` was imported, so the
    build under test stays the one its environment selects)."""
    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)


def load_factory(spec: str) -> Callable[[], Any]:
    """The factory SPEC names (a file target is imported under its file name)."""
    target, attr = split_spec(spec)
    module = _load_file(target) if is_file_target(target) else importlib.import_module(target)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise WorkflowError(f"{target} has no attribute {attr!r}") from None
    if not callable(obj):
        raise WorkflowError(f"{spec} is not callable")
    return obj


def _load_file(path: str) -> Any:
    name = os.path.splitext(os.path.basename(path))[0]
    loaded = sys.modules.get(name)
    if loaded is not None and os.path.abspath(getattr(loaded, "__file__", "") or "") == os.path.abspath(path):
        return loaded
    if loaded is not None or not name.isidentifier():
        name = f"_amrita_sense_workflow_{abs(hash(path))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise WorkflowError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def as_graph(obj: Any) -> Any:
    """`obj` as a rendered graph (a compose or a self-compiling instruction is rendered), or None."""
    if getattr(obj, "__rendered_compose__", False):
        return obj
    if hasattr(obj, "extract"):  # a self-compiling instruction
        obj = obj.extract()
    if hasattr(obj, "render"):
        return obj.render()
    return None


def one_run(made: Any, what: str = "the factory") -> Callable[[], Any]:
    """An async function that runs what the factory made once."""
    graph = as_graph(made)
    if graph is not None:
        from amrita_sense import WorkflowInterpreter

        async def run_graph() -> None:
            await WorkflowInterpreter(graph).run()

        return run_graph
    if callable(made):

        async def run_callable() -> None:
            result = made()
            if inspect.isawaitable(result):
                await result

        return run_callable
    raise WorkflowError(f"{what} returned {type(made).__name__}; expected a graph or an async callable")


# ---------------------------------------------------------------------------
# Which of the user's functions the engine enters


def user_roots(factory: Callable[[], Any]) -> List[str]:
    """Files and directories whose code counts as the user's: the directory of the factory's
    module (its top-level package's directory inside a package), or only the module's file
    when that directory is an environment's site-packages."""
    module = sys.modules.get(getattr(factory, "__module__", "") or "")
    filename = os.path.abspath(getattr(module, "__file__", "") or inspect.getfile(factory))
    top = sys.modules.get(module.__name__.split(".")[0]) if module is not None else None
    top_file = getattr(top, "__file__", None) if top is not None and top is not module else None
    if top_file and os.path.basename(top_file) == "__init__.py":
        return [os.path.dirname(os.path.abspath(top_file))]
    if filename.endswith("__init__.py"):
        return [os.path.dirname(filename)]
    directory = os.path.dirname(filename)
    return [filename] if directory in _site_dirs() else [directory]


def _site_dirs() -> set:
    paths = sysconfig.get_paths()
    return {os.path.abspath(paths[key]) for key in ("purelib", "platlib") if key in paths}


def _engine_dirs(roots: List[str]) -> List[str]:
    """Code that is never the user's even below a user root (a checkout holding the runtime, a
    project's own .venv): the runtime, this package, the standard library, and the environment's
    site-packages unless the user's code is installed there."""
    import amrita_sense

    dirs = [os.path.abspath(d) for d in getattr(amrita_sense, "__path__", [])]
    dirs.append(os.path.dirname(os.path.abspath(__file__)))
    paths = sysconfig.get_paths()
    dirs += [os.path.abspath(paths[key]) for key in ("stdlib", "platstdlib") if key in paths]
    dirs += [d for d in _site_dirs() if not any(os.path.abspath(r).startswith(d + os.sep) for r in roots)]
    return [d + os.sep for d in dirs]


class NodeRecorder:
    """A profile hook (`sys.setprofile`, in every thread) that records each *entry* of the
    engine into the user's code: a fresh call of a user function whose caller is not user
    code. Those are the nodes, conditions, handlers and providers the engine ran, in order.

    With `timing`, it also keeps, for each entry, when its body started and ended (a
    coroutine body ends at its final return, not at an `await` that suspends it) and how
    many profile events fell inside it and before it, so `profile_runs` can split the run's
    time into bodies and engine overhead.
    """

    def __init__(self, roots: List[str], timing: bool = False, limit: int = TRACE_LIMIT) -> None:
        self.limit = limit
        self.roots = [r if r.endswith(".py") else r.rstrip(os.sep) + os.sep for r in roots]
        self.engine = _engine_dirs(roots)
        self.timing = timing
        self.entries: List[list] = []  # [label, start, end, events before the body, events in it]
        self.events = 0
        self._user: Dict[Any, bool] = {}
        self._starts: Dict[Any, int] = {}  # code -> the f_lasti of a fresh start
        self._open: Dict[int, list] = {}  # id(frame) of a running root body -> its entry
        self._active = False
        self._clock = time.perf_counter

    # -- classification
    def is_user(self, code: Any) -> bool:
        known = self._user.get(code)
        if known is None:
            filename = os.path.abspath(code.co_filename)
            known = (
                not code.co_filename.startswith("<")  # exec'd or generated code, frozen modules
                and any(filename == r or filename.startswith(r) for r in self.roots)
                and not any(filename.startswith(d) for d in self.engine)
            )
            self._user[code] = known
        return known

    def label(self, code: Any) -> str:
        name = getattr(code, "co_qualname", code.co_name)
        base = self.roots[0] if self.roots[0].endswith(os.sep) else os.path.dirname(self.roots[0]) + os.sep
        filename = os.path.abspath(code.co_filename)
        where = filename[len(base) :] if filename.startswith(base) else os.path.basename(filename)
        return f"{name} ({where}:{code.co_firstlineno})"

    def _fresh(self, frame: Any) -> bool:
        start = self._starts.setdefault(frame.f_code, frame.f_lasti)
        return frame.f_lasti == start

    # -- the hook
    def hook(self, frame: Any, event: str, arg: Any) -> None:
        if not self._active:
            sys.setprofile(None)  # a thread's first event after stop() removes its hook
            return
        self.events += 1
        if event == "call":
            self._on_call(frame)
        elif event == "return" and self.timing and id(frame) in self._open:
            self._on_return(frame)

    def _on_call(self, frame: Any) -> None:
        code = frame.f_code
        if not self.is_user(code):
            return
        caller = frame.f_back
        if caller is not None and self.is_user(caller.f_code):
            return
        if not self._fresh(frame) or len(self.entries) >= self.limit:
            return
        entry = [self.label(code), 0.0, 0.0, self.events, 0]
        self.entries.append(entry)
        if self.timing:
            self._open[id(frame)] = entry
            entry[1] = self._clock()

    def _on_return(self, frame: Any) -> None:
        if _suspends(frame):
            return
        entry = self._open.pop(id(frame))
        entry[2] = self._clock()
        entry[4] = self.events - entry[3]

    def start(self) -> None:
        self._active = True
        # 3.12+: every thread, running ones too; before, only the threads started from now on
        set_all = getattr(threading, "setprofile_all_threads", None)
        (set_all or threading.setprofile)(self.hook)
        sys.setprofile(self.hook)

    def stop(self) -> None:
        self._active = False
        sys.setprofile(None)
        threading.setprofile(None)
        clear_all = getattr(threading, "setprofile_all_threads", None)
        if clear_all is not None:
            clear_all(None)


_YIELDS = {dis.opmap[name] for name in ("YIELD_VALUE", "YIELD_FROM") if name in dis.opmap}  # YIELD_FROM: 3.10


def _suspends(frame: Any) -> bool:
    """Whether a coroutine or generator frame's "return" event is a suspension (a yield)."""
    if not frame.f_code.co_flags & (inspect.CO_COROUTINE | inspect.CO_GENERATOR | inspect.CO_ITERABLE_COROUTINE):
        return False
    code = frame.f_code.co_code
    return 0 <= frame.f_lasti < len(code) and code[frame.f_lasti] in _YIELDS


async def trace_run(run: Callable[[], Any], roots: List[str]) -> List[str]:
    """The node trace of one run: the labels of the user's functions the engine entered."""
    recorder = NodeRecorder(roots)
    recorder.start()
    try:
        await run()
    finally:
        recorder.stop()
    return [entry[0] for entry in recorder.entries]


def first_difference(a: List[str], b: List[str]) -> Optional[int]:
    """The index of the first entry where two traces differ (None when they are equal)."""
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


# ---------------------------------------------------------------------------
# Measuring and profiling


class RunPlan:
    """`runs` runs of the workflow as one measurement (the shape of `scenarios.Plan`)."""

    result = None

    def __init__(self, run: Callable[[], Any], runs: int) -> None:
        self.ops = runs
        self.done = 0
        self._run = run

    def prepare(self) -> None:
        self.done = 0

    async def timed(self) -> None:
        run = self._run
        for _ in range(self.ops):
            await run()
            self.done += 1

    def check(self) -> None:
        if self.done != self.ops:
            raise AssertionError(f"workflow runs: counted {self.done}, expected {self.ops}")


class Workflow:
    """SPEC loaded in this process: one run of it, and the user's code it runs."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        factory = load_factory(spec)
        self.run = one_run(factory(), spec)
        self.roots = user_roots(factory)

    async def trace(self) -> List[str]:
        """The node trace of one run (a run that enters none of the user's code is an error)."""
        trace = await trace_run(self.run, self.roots)
        if not trace:
            raise NothingRan(
                f"{self.spec}: the workflow ran none of its functions (user code under {', '.join(self.roots)})"
            )
        return trace

    async def plan(self, runs: int = 0, seconds: float = 0.2) -> RunPlan:
        """A measurement of `runs` runs (0: about `seconds` worth, judged from one run)."""
        if runs <= 0:
            once = await _time_one(self.run)
            runs = max(1, min(10_000, int(seconds / max(once, 1e-7))))
        return RunPlan(self.run, runs)


async def _time_one(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    await run()
    return time.perf_counter() - start


async def profile_runs(workflow: Workflow, runs: int = 0, seconds: float = 1.0) -> dict:
    """Where `runs` runs (0: as many as fit in `seconds`) of the workflow spend their time, per
    user function: its own body (nested entries excluded) and the engine's time before it.

    The profiler's own cost is taken out per profile event: the median profiled run minus
    the median plain run, divided by the median run's events, so the parts add up to a plain
    run. Nothing runs before the profiler starts, so every worker thread the workflow starts
    is profiled (before Python 3.12 a profile hook reaches only threads started after it)."""
    recorder = NodeRecorder(workflow.roots, timing=True, limit=PROFILE_LIMIT)
    bounds: List[tuple] = []
    deadline = time.perf_counter() + seconds

    def another_run() -> bool:
        if len(recorder.entries) >= PROFILE_LIMIT // 2:
            return False
        return len(bounds) < 2 * runs if runs > 0 else (len(bounds) < 6 or time.perf_counter() < deadline)

    recorder.start()
    try:
        while another_run():
            bounds.append((time.perf_counter(), recorder.events, len(recorder.entries)))
            await workflow.run()
            bounds.append((time.perf_counter(), recorder.events, len(recorder.entries)))
    finally:
        recorder.stop()
    runs = len(bounds) // 2
    plain = _median([await _time_one(workflow.run) for _ in range(max(5, min(runs, 25)))])
    profiled = _median([bounds[i + 1][0] - bounds[i][0] for i in range(0, len(bounds), 2)])
    events = _median([bounds[i + 1][1] - bounds[i][1] for i in range(0, len(bounds), 2)])
    cost = max(0.0, (profiled - plain) / events) if events else 0.0
    rows, after = _account(recorder.entries, bounds, cost)
    return {
        "runs": runs,
        "run_s": plain,
        "profiled_run_s": profiled,
        "events_per_run": events,
        "event_cost_s": cost,
        "after_s": after,
        "rows": [
            {"label": label, "calls": calls, "body_s": body, "engine_s": engine}
            for label, (calls, body, engine) in rows.items()
        ],
    }


def _median(values: List[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def _account(entries: List[list], bounds: List[tuple], cost: float) -> Tuple[Dict[str, list], float]:
    """Per label: calls per run (mean), and the median over the runs of its exclusive body time
    and of the engine time before its top-level entries (an entry nested in a running body,
    e.g. a provider or a `call_sub` target, has no engine time of its own: its caller's body
    covers it); and the median engine time after the last entry. Medians keep a run hit by
    a preemption from moving the parts."""
    per_run: List[Dict[str, list]] = []
    afters = []
    for index in range(0, len(bounds), 2):
        (t0, e0, first), (t1, e1, last) = bounds[index], bounds[index + 1]
        rows: Dict[str, list] = {}
        cursor, cursor_events = t0, e0
        for entry, nested, nested_events, top in _nesting(entries[first:last]):
            label, start, end, ev_start, ev_end = entry
            row = rows.setdefault(label, [0, 0.0, 0.0])
            row[0] += 1
            row[1] += max(0.0, (end - start - nested) - cost * (ev_end - ev_start - nested_events))
            if top:
                row[2] += max(0.0, (start - cursor) - cost * (ev_start - cursor_events))
                cursor, cursor_events = end, ev_end
        afters.append(max(0.0, (t1 - cursor) - cost * (e1 - cursor_events)))
        per_run.append(rows)
    labels = dict.fromkeys(label for rows in per_run for label in rows)
    empty = [0, 0.0, 0.0]
    summary = {
        label: [
            sum(rows.get(label, empty)[0] for rows in per_run) / len(per_run),
            _median([rows.get(label, empty)[1] for rows in per_run]),
            _median([rows.get(label, empty)[2] for rows in per_run]),
        ]
        for label in labels
    }
    return summary, _median(afters)


def _nesting(entries: List[list]) -> List[tuple]:
    """(entry as (label, start, end, events at start, events at end), time and events of its
    direct children, whether it is top-level), in start order."""
    spans = [(e[0], e[1], max(e[1], e[2]), e[3], e[3] + e[4]) for e in entries]
    children = [[0.0, 0] for _ in spans]
    top = [True] * len(spans)
    stack: List[int] = []
    for i, (_, start, _end, _, _) in enumerate(spans):
        while stack and spans[stack[-1]][2] <= start:
            stack.pop()
        if stack:
            parent = stack[-1]
            top[i] = False
            children[parent][0] += spans[i][2] - start
            children[parent][1] += spans[i][4] - spans[i][3]
        stack.append(i)
    return [(spans[i], children[i][0], children[i][1], top[i]) for i in range(len(spans))]
