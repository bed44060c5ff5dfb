"""Benchmark worker: one build on one event loop, driven by the runner over stdin/stdout.

Started as a script, by path (`python .../amrita_sense/bench/_worker.py --loop asyncio
--expect cython`), so it also runs under a foreign Python whose `amrita_sense` has no
`bench` package (the 1.1.3 reference venv): it loads its sibling package `scenarios/` by path
too, so every build runs the very same scenario code. With `--expect peer --peer NAME` it runs
in a peer's environment (no amrita_sense at all) and serves the peers' work
(`scenarios.PEER_WORKS`) with that peer's module from `peers/`, loaded by path as well, after
switching the peer's telemetry off. Protocol: one JSON
command per line on stdin, one JSON reply per line on the original stdout. The
process's own stdout (fd 1) is sent to /dev/null before anything is imported, so
log output of the package under test cannot corrupt the protocol.

Commands:
  {"op": "hello"}                                -> build description, or why it is unavailable
  {"op": "run", "scenario": NAME, "size": N, "budget": S}      -> one measurement of a scenario
      (the durable work adds "mode": a durability mode, and "postgres": the server to store into,
      or "postgres_problem": why there is none; the reply then carries the store's settings, "note")
  {"op": "trace", "spec": SPEC}                  -> the node trace of one run of a user workflow
  {"op": "workflow", "spec": SPEC, "runs": N, "budget": S}     -> one measurement of a user workflow
  {"op": "profile", "spec": SPEC, "runs": N}     -> the per-node profile of N runs
A measurement is the best of as many runs as fit in `budget` seconds (at least one).
Replies carry "status": "ok" | "n/a" | "fail" (count check) | "error".
The runner sends "trace" first, before anything else has started a thread: the trace's
profile hook then reaches every thread the workflow uses.
"""

import argparse
import json
import os
import sys
import traceback
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def load_sibling(name: str, path: str = ""):
    """Import `HERE/<name>.py`, the package `HERE/<name>/` (its modules import each other
    relatively) or `path` under a private module name (registered, so dataclasses and pickles
    defined in it resolve their module)."""
    import importlib.util

    module_name = f"_amrita_sense_bench_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    package = os.path.join(HERE, name)
    if not path and os.path.isfile(os.path.join(package, "__init__.py")):
        spec = importlib.util.spec_from_file_location(
            module_name, os.path.join(package, "__init__.py"), submodule_search_locations=[package]
        )
    else:
        spec = importlib.util.spec_from_file_location(module_name, path or os.path.join(HERE, f"{name}.py"))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path or name + '.py'} from {HERE}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _protocol_channel():
    """Keep the real stdout for replies; point fd 1 (and sys.stdout) at /dev/null."""
    channel = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    sys.stdout = open(os.devnull, "w", encoding="utf-8")
    return channel


def _make_loop(name: str) -> Any:
    import asyncio

    loop: Any
    if name == "uvloop":
        import uvloop  # ImportError is reported as "n/a" by hello

        loop = uvloop.new_event_loop()
    elif name == "asyncio":
        loop = asyncio.new_event_loop()
    else:
        raise ValueError(f"unknown event loop {name!r}")
    asyncio.set_event_loop(loop)
    return loop


def _distribution_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def _describe_build(expect: str) -> dict:
    """What this Python's `amrita_sense` is. `expect` "reference" (the --against column)
    accepts any build: amrita-sense itself, or amrita-sense-turbo in another environment."""
    import platform

    import amrita_sense

    impl = getattr(amrita_sense, "IMPLEMENTATION", None)
    info = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "module_path": os.path.dirname(amrita_sense.__file__),
    }
    if impl is None:
        if expect != "reference":
            raise RuntimeError(f"{info['module_path']} is not amrita-sense-turbo (no IMPLEMENTATION)")
        info.update(implementation="reference", version=_distribution_version("amrita-sense"))
        return info
    if expect not in ("reference", impl):
        raise RuntimeError(f"expected the {expect} core, but {impl} loaded")
    version = getattr(amrita_sense, "__version__", None) or _distribution_version("amrita-sense-turbo")
    # the core's selector: `amrita_sense.core`, or `amrita_sense._core` in builds made before it moved
    selector = sys.modules.get(f"{amrita_sense.__name__}.core") or sys.modules[f"{amrita_sense.__name__}._core"]
    info.update(implementation=impl, version=version, core_file=selector._impl.__file__)
    return info


def _load_peer(name: str) -> tuple:
    """The registry entry of peer `name` and its module (both loaded by path)."""
    registry = load_sibling("peers", os.path.join(HERE, "peers", "__init__.py"))
    if name not in registry.PEERS:
        raise RuntimeError(f"unknown peer {name!r}")
    entry = registry.PEERS[name]
    return entry, load_sibling(f"peer_{entry.module}", entry.path)


def _describe_peer(entry: Any, module: Any) -> dict:
    """The peer's versions and how its telemetry stands; switches it off first."""
    import platform

    os.environ.update(module.TELEMETRY_OFF)  # before the library is imported (telemetry() imports it)
    telemetry = module.telemetry()
    versions = {dist: _distribution_version(dist) for dist in entry.reported}
    durable = getattr(module, "DURABLE", {}) if "durable" in getattr(entry, "kinds", ("peer",)) else {}
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "implementation": "peer",
        "kinds": list(getattr(entry, "kinds", ("peer",))),
        "durable": {work: dict(modes) for work, modes in durable.items()},
        "peer": entry.name,
        "label": entry.label,
        "version": versions[entry.reported[0]],
        "versions": versions,
        "requirements": list(entry.install),
        "telemetry": telemetry,
    }


class Worker:
    def __init__(self, loop_name: str, expect: str, paths: list, peer: str = "") -> None:
        self.loop_name = loop_name
        self.expect = expect
        self.paths = paths
        self.peer_name = peer
        self.peer: Any = None  # with --peer: that peer's module (its `build(work, scenarios)`)
        self.loop: Any = None
        self.scenarios: Any = None  # scenarios/ and workload.py, loaded by path by hello
        self.workload: Any = None
        self.workflows: dict = {}  # spec -> workload.Workflow, loaded once
        self.cached: Any = None  # (key, plan): the last plan built, reused while the same scenario repeats
        self.folder = ""  # the durable work's files (a temporary folder, removed when the worker ends)

    def hello(self) -> dict:
        try:
            self.loop = _make_loop(self.loop_name)
        except ImportError as exc:
            return {"status": "n/a", "reason": f"{self.loop_name} is not installed here ({exc})"}
        try:
            if self.peer_name:
                entry, self.peer = _load_peer(self.peer_name)
                info = _describe_peer(entry, self.peer)
            else:
                info = _describe_build(self.expect)
        except Exception as exc:  # noqa: BLE001 - any import failure makes the build unavailable
            return {"status": "n/a", "reason": f"{type(exc).__name__}: {exc}"}
        self.scenarios = load_sibling("scenarios")
        self.workload = load_sibling("workload")
        self.workload.add_import_paths(self.paths)
        if not self.peer_name:  # what this build runs of the durable work (ours: its durability modes)
            info["durable"] = self.scenarios.durable_systems()
        info.update(status="ok", loop=self.loop_name)
        return info

    def workflow(self, spec: str):
        if spec not in self.workflows:
            self.workflows[spec] = self.workload.Workflow(spec)
        return self.workflows[spec]

    def answer(self, compute) -> dict:
        """Run `compute()` (a coroutine function returning the reply's fields) on the loop."""
        try:
            fields = self.loop.run_until_complete(compute())
        except self.scenarios.Unavailable as exc:
            return {"status": "n/a", "reason": str(exc)}
        except AssertionError as exc:  # a count check (scenarios.CountMismatch, workload.NothingRan)
            return {"status": "fail", "reason": str(exc)}
        except self.workload.WorkflowError as exc:
            return {"status": "error", "reason": str(exc)}
        except Exception as exc:  # noqa: BLE001 - reported, the run goes on
            return {
                "status": "error",
                "reason": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=8),
            }
        return {"status": "ok", **(fields or {})}

    async def _plan(self, key: tuple, make):
        if self.cached is None or self.cached[0] != key:
            await self._close_plan()
            plan = make()
            if hasattr(plan, "__await__"):
                plan = await plan
            self.cached = (key, plan)
        return self.cached[1]

    async def _close_plan(self) -> None:
        """Release what the cached plan holds (a durable plan's connections, files, a runtime)."""
        cached, self.cached = self.cached, None
        close = getattr(cached[1], "close", None) if cached is not None else None
        if close is not None:
            done = close()
            if hasattr(done, "__await__"):
                await done

    def measure(self, key: tuple, make, budget: float) -> dict:
        async def compute() -> dict:
            plan = await self._plan(key, make)
            value, runs = await self.scenarios.measure_best(plan, budget)
            reply = {"value": value, "ops": plan.ops, "runs": runs}
            if getattr(plan, "note", ""):
                reply["note"] = plan.note
            if getattr(plan, "parts", None) is not None:
                reply["parts"] = await plan.parts()
            return reply

        reply = self.answer(compute)
        if reply["status"] != "ok" and self.cached is not None:
            self.answer(self._close_plan)  # its own failure to close is not this reply's
            self.cached = None
        return reply

    def close(self) -> None:
        """At the end: close the last plan, remove the durable work's folder."""
        if self.loop is not None and self.scenarios is not None:
            self.answer(self._close_plan)
        if self.folder:
            import shutil

            shutil.rmtree(self.folder, ignore_errors=True)

    def place(self, cmd: dict) -> dict:
        """Where the durable work stores: this worker's folder, the runner's Postgres server."""
        if not self.folder:
            import tempfile

            self.folder = tempfile.mkdtemp(prefix="amrita-bench-durable-")
        return {"dir": self.folder, "postgres": cmd.get("postgres"), "postgres_problem": cmd.get("postgres_problem")}

    def plan(self, name: str, size: Any, cmd: Any = None) -> Any:
        """Scenario `name` on this build; on a peer, that peer's version of the peers' work (or of
        the durable work, in the command's mode)."""
        cmd = cmd or {}
        durable = "mode" in cmd
        if self.peer is None:
            if durable:
                return self.scenarios.build(name, size, mode=cmd["mode"], place=self.place(cmd))
            return self.scenarios.build(name, size)
        size = size or (self.scenarios.SCENARIOS[name].size if name in self.scenarios.SCENARIOS else 0)
        if durable and name in self.scenarios.DURABLE_WORKS:
            return self._peer_durable(name, size, cmd["mode"], self.place(cmd))
        if name not in self.scenarios.PEER_WORKS:
            raise self.scenarios.Unavailable(f"a peer runs the peers' work only, not {name}")
        return self.scenarios.peer_plan(name, size, self.peer.build(name, self.scenarios))

    async def _peer_durable(self, name: str, size: int, mode: str, place: dict) -> Any:
        modes = getattr(self.peer, "DURABLE", {}).get(name, {})
        if mode not in modes:
            raise self.scenarios.Unavailable(f"{name} in the {mode!r} mode is not written for this peer")
        system = self.peer.durable(name, mode, self.scenarios, place)
        if hasattr(system, "__await__"):
            system = await system
        return self.scenarios.durable_plan(name, size, system)

    async def _trace(self, spec: str) -> dict:
        return {"trace": await self.workflow(spec).trace()}

    def handle(self, cmd: dict) -> dict:
        op = cmd.get("op")
        if op == "hello":
            return self.hello()
        if self.scenarios is None:
            return {"status": "error", "reason": "hello first"}
        budget = float(cmd.get("budget") or 0.0)
        if op == "run":
            name, size = cmd["scenario"], cmd.get("size")
            key = ("run", name, size, cmd.get("mode"), cmd.get("postgres") and cmd["postgres"].get("dsn"))
            return self.measure(key, lambda: self.plan(name, size, cmd), budget)
        spec, runs = cmd.get("spec", ""), int(cmd.get("runs") or 0)
        if op == "trace":
            return self.answer(lambda: self._trace(spec))
        if op == "workflow":
            return self.measure(("workflow", spec, runs), lambda: self.workflow(spec).plan(runs), budget)
        if op == "profile":
            seconds = float(cmd.get("seconds") or 1.0)
            return self.answer(lambda: self.workload.profile_runs(self.workflow(spec), runs, seconds))
        return {"status": "error", "reason": f"unknown op {op!r}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", default="asyncio")
    parser.add_argument("--expect", required=True, choices=["cython", "python", "reference", "peer"])
    parser.add_argument("--peer", default="", help="with --expect peer: the peer's name (peers.PEERS)")
    parser.add_argument(
        "--path",
        action="append",
        default=[],
        help="a directory to import user workflows from (first on sys.path, after the build loaded)",
    )
    args = parser.parse_args()
    channel = _protocol_channel()
    # The script's directory (sys.path[0]) holds runner.py, scenarios/...: never importable by name.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
    if (args.expect == "peer") != bool(args.peer):
        parser.error("--expect peer and --peer NAME go together")
    worker = Worker(args.loop, args.expect, args.path, args.peer)
    try:
        for line in sys.stdin:
            if not line.strip():
                continue
            reply = worker.handle(json.loads(line))
            channel.write(json.dumps(reply) + "\n")
    finally:
        worker.close()


if __name__ == "__main__":
    main()
