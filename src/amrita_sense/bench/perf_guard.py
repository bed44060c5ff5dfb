"""The instruction-count guard (issue 43): the compiled core's cost per operation for seven user
shapes (the durable request's too: issue 44), counted by callgrind, against a committed baseline, so the speed cannot leave unnoticed.

    python -m amrita_sense.bench.perf_guard                  # check (the default)
    python -m amrita_sense.bench.perf_guard record --why "..."   # re-record the baseline
    python -m amrita_sense.bench.perf_guard measure          # print the counts, compare nothing

Each shape is one of the runner's own scenarios (`scenarios.SCENARIOS`, what `python -m
amrita_sense.bench` times), run on asyncio's event loop with PYTHONHASHSEED=0 in a process under
`valgrind --tool=callgrind`. In that process the scenario's plan is built at two sizes n1 < n2; each
plan runs once uncounted (warm-up: plans made, caches filled), then its prepare step, and then its
timed part (n operations) inside `sys.call_tracing(...)`, whose C function `sys_call_tracing` is
callgrind's `--toggle-collect` marker: only the timed part is counted (`--dump-after` writes one
count per size). The cyclic garbage collector is off in the counted part (collected just before):
it runs in lumps at allocation thresholds, and whether a window holds one more generation-1
collection moves the count by several percent whatever the change; allocations themselves stay
counted. Instructions per operation = (I(n2) - I(n1)) / (n2 - n1), which cancels what a
timed part costs once (its coroutine, `run_until_complete`). The child runs without address-space
randomisation, so the counts are deterministic: two runs of the same code agree to within 0.1%
(here: exactly), whatever else the machine is doing. A change elsewhere that moves the memory
layout may still move a count by up to about 1%, well inside the 3% allowed.

`check` fails (exit 1) naming each scenario whose count rose more than 3% over the baseline, with
both counts. A deliberate rise is accepted only by re-recording the baseline in the same commit with
a reason (`record --why`); `check` also fails when the baseline's counts differ from the previous
commit's version of the file but its `why` does not. Counts of different interpreters are not
comparable: when the Python implementation, its minor version or the machine differs from the
baseline's, `check` says so and skips the comparison (exit 0), or fails with `--strict` (exit 3;
CI passes it, so a changed CI interpreter asks for a re-record instead of silently guarding
nothing). A different patch version is compared, with a note. Exit 2: the guard could not measure
(no valgrind, the pure build loaded, a Python without symbols).
"""

import argparse
import asyncio
import concurrent.futures
import gc
import glob
import inspect
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import amrita_sense

from .scenarios import build

# scenario -> (the user shape it stands for, its two sizes n1 < n2)
SHAPES: dict[str, tuple[str, tuple[int, int]]] = {
    "peer_chain": ("the peer chain (a 20-node request chain)", (10, 210)),
    "peer_agent": ("the agent loop (10 iterations of model step, then tool or finish)", (10, 210)),
    "peer_if_else": ("the branch (IF/ELSE on the request)", (20, 420)),
    "event_dispatch": ("event dispatch to one handler", (50, 1050)),
    "event_request": ("an event dispatched with 2 contexts of 10 injected into its handler", (50, 550)),
    "per_request": ("the request shape (a new interpreter per run, 2 injected contexts of 10)", (10, 210)),
    "suspend_resume": ("suspend at PC_CHECKPOINT and resume, round trip", (50, 550)),
    "durable_sqlite": (
        "the durable request (a 10-node chain, a signed checkpoint into SQLite after every node, a new run each)",
        (4, 24),
    ),
}
THRESHOLD = 0.03  # a rise of more than this fraction fails
BASELINE = os.path.join("bench", "perf_baseline.json")  # relative to the checkout's root
MARKER = "sys_call_tracing"  # the C function of sys.call_tracing: callgrind counts inside it only
RECORD = 'python -m amrita_sense.bench.perf_guard record --why "..."'


class GuardError(Exception):
    """The guard could not measure or read its baseline (exit 2)."""


# ---------------------------------------------------------------------------
# The counted process (run under callgrind)


def _count(name: str, sizes: Sequence[int], out: str) -> None:
    """Build scenario `name` at each size, warm it up, and run its timed part once inside
    `sys.call_tracing` (one callgrind dump per size); write what loaded to `out`."""
    loop = asyncio.SelectorEventLoop()  # asyncio's own loop, whatever policy is installed
    asyncio.set_event_loop(loop)

    def settle(value: Any) -> Any:
        return loop.run_until_complete(value) if inspect.isawaitable(value) else value

    def complete(timed: Any) -> None:
        loop.run_until_complete(timed())

    for n in sizes:
        plan = build(name, n)
        for counted in (False, True):
            if plan.prepare is not None:
                settle(plan.prepare())
            gc.collect()
            call, args = (complete, (plan.timed,)) if inspect.iscoroutinefunction(plan.timed) else (plan.timed, ())
            if counted:
                gc.disable()  # its lumps would move the count: see the docstring
                sys.call_tracing(call, args)
                gc.enable()
            else:
                call(*args)
            if plan.check is not None:
                settle(plan.check())
    loop.close()
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"implementation": getattr(amrita_sense, "IMPLEMENTATION", None), "ops": list(sizes)}, f)


# ---------------------------------------------------------------------------
# Measuring


def interpreter() -> dict[str, str]:
    """What the counts depend on: the interpreter and the machine."""
    return {
        "implementation": platform.python_implementation(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "system": platform.system(),
    }


def valgrind_version() -> str:
    try:
        return subprocess.run([_valgrind(), "--version"], capture_output=True, text=True).stdout.strip()
    except (OSError, GuardError):
        return "unknown"


def comparable(recorded: dict[str, str], here: dict[str, str]) -> bool:
    """Same implementation, minor version and machine (a patch release may differ)."""

    def key(info: dict[str, str]) -> tuple:
        return (info.get("implementation"), ".".join(info.get("python", "").split(".")[:2]), info.get("machine"))

    return key(recorded) == key(here)


def _valgrind() -> str:
    path = shutil.which("valgrind")
    if path is None:
        raise GuardError("valgrind is not installed (the guard counts instructions with valgrind --tool=callgrind)")
    return path


ADDR_NO_RANDOMIZE = 0x0040000  # personality(2): the child's address layout is the same every run


def _fixed_layout() -> None:
    """In the child before exec: no address-space randomisation. Python hashes many objects by
    address (dict and set probes); a randomised layout moves the counts by up to ~2% run to run,
    a fixed one leaves ~0.1% (setarch -R does the same)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    current = libc.personality(0xFFFFFFFF)
    if current != -1:
        libc.personality(current | ADDR_NO_RANDOMIZE)


def _totals(path: str) -> int:
    """The instruction total of one callgrind dump."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith(("totals:", "summary:")):
                return int(line.split()[1])
    raise GuardError(f"no totals in {path}")


def marker_missing() -> str | None:
    """Why callgrind cannot count here (no valgrind, or this Python's `sys_call_tracing` has no
    symbol valgrind sees: a stripped interpreter), or None; a probe of a few seconds."""
    try:
        valgrind = _valgrind()
    except GuardError as exc:
        return str(exc)
    with tempfile.TemporaryDirectory(prefix="perf_guard_probe_") as tmp:
        out = os.path.join(tmp, "callgrind.out")
        probe = [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", f"--log-file={out}.log"]
        probe += ["--collect-atstart=no", f"--toggle-collect={MARKER}", sys.executable, "-S", "-c"]
        probe += ["import sys; sys.call_tracing(sum, ([1, 2],))"]
        done = subprocess.run(probe, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if done.returncode != 0 or not os.path.exists(out) or _totals(out) == 0:
            return (
                f"callgrind counted nothing inside {MARKER} (exit {done.returncode}): this Python has no "
                "symbol for it that valgrind can see (a stripped interpreter? install its debug symbols)"
            )
    return None


def count_scenario(name: str, sizes: tuple[int, int], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Instructions per operation of scenario `name` on the compiled core."""
    valgrind = _valgrind()
    with tempfile.TemporaryDirectory(prefix="perf_guard_") as tmp:
        out = os.path.join(tmp, "callgrind.out")
        child_env = dict(os.environ if env is None else env)
        child_env.pop("AMRITA_SENSE_NO_EXTENSIONS", None)
        child_env.update(PYTHONHASHSEED="0", AMRITA_SENSE_REQUIRE_EXTENSIONS="1")
        command = [
            valgrind,
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            f"--log-file={os.path.join(tmp, 'valgrind.log')}",
            "--collect-atstart=no",
            f"--toggle-collect={MARKER}",
            f"--dump-after={MARKER}",
            sys.executable,
            "-m",
            "amrita_sense.bench.perf_guard",
            "_count",
            name,
            *map(str, sizes),
            "--out",
            os.path.join(tmp, "loaded.json"),
        ]
        done = subprocess.run(
            command,
            env=child_env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_fixed_layout if sys.platform.startswith("linux") else None,
        )
        if done.returncode != 0:
            with open(os.path.join(tmp, "valgrind.log"), encoding="utf-8", errors="replace") as f:
                log = f.read()[-2000:]
            raise GuardError(f"{name}: the counted run failed (exit {done.returncode}):\n{done.stderr[-3000:]}{log}")
        with open(os.path.join(tmp, "loaded.json"), encoding="utf-8") as f:
            loaded = json.load(f)
        if loaded["implementation"] != "cython":
            raise GuardError(
                f"{name}: the {loaded['implementation']} core loaded; the guard measures the compiled core"
            )
        dumps = sorted(glob.glob(out + ".*"), key=lambda path: int(path.rsplit(".", 1)[1]))
        counts = [_totals(path) for path in dumps]
        if len(counts) != len(sizes) or not all(counts):
            raise GuardError(
                f"{name}: expected {len(sizes)} counted runs, callgrind dumped {counts}: this Python's "
                f"{MARKER} has no symbol valgrind can see (a stripped interpreter?)"
            )
    (n1, n2), (i1, i2) = sizes, counts
    return {"per_op": round((i2 - i1) / (n2 - n1)), "n": [n1, n2], "instructions": [i1, i2]}


def count_all(
    names: Sequence[str], sizes: dict[str, tuple[int, int]], jobs: int, env: dict[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """Count every scenario of `names`, `jobs` processes at a time (the counts do not depend on it)."""
    problem = marker_missing()
    if problem is not None:
        raise GuardError(problem)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {name: pool.submit(count_scenario, name, sizes[name], env) for name in names}
        return {name: future.result() for name, future in futures.items()}


# ---------------------------------------------------------------------------
# The baseline


def default_baseline() -> str:
    """bench/perf_baseline.json of the checkout holding the current directory."""
    try:
        root = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        root = os.getcwd()
    return os.path.join(root, BASELINE)


def load_baseline(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as f:
            return parse_baseline(f.read(), path)
    except FileNotFoundError:
        raise GuardError(f"no baseline at {path}: record one with {RECORD}") from None


def parse_baseline(text: str, where: str = "the baseline") -> dict[str, Any]:
    baseline = json.loads(text)
    if not isinstance(baseline.get("scenarios"), dict) or not str(baseline.get("why", "")).strip():
        raise GuardError(f"{where}: needs 'scenarios' and a non-empty 'why'")
    for name, entry in baseline["scenarios"].items():
        if not isinstance(entry.get("per_op"), int) or entry["per_op"] <= 0 or len(entry.get("n", ())) != 2:
            raise GuardError(f"{where}: scenario {name!r} needs a positive integer 'per_op' and 'n': [n1, n2]")
    return baseline


def numbers(baseline: dict[str, Any]) -> dict[str, Any]:
    """What a re-record must explain: each scenario's count and sizes."""
    return {name: (entry["per_op"], list(entry["n"])) for name, entry in baseline["scenarios"].items()}


def _git(cwd: str, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def history_problem(path: str) -> tuple[str | None, str]:
    """(a failure, a note): the baseline's counts changed since the previous commit but its `why`
    did not. The previous version is HEAD's when the file differs from HEAD's (a re-record not yet
    committed), else HEAD~1's; without git history the check is skipped with a note."""
    folder = os.path.dirname(os.path.abspath(path))
    root = _git(folder, "rev-parse", "--show-toplevel")
    if root is None:
        return None, "no git, or the baseline is not in a git checkout: its why was not checked against history"
    rel = os.path.relpath(os.path.abspath(path), root.strip()).replace(os.sep, "/")
    with open(path, encoding="utf-8") as f:
        current = f.read()
    head = _git(folder, "show", f"HEAD:{rel}")
    previous: str | None
    if head is not None and head != current:
        previous, label = head, "HEAD"
    else:
        previous, label = _git(folder, "show", f"HEAD~1:{rel}"), "HEAD~1"
    if previous is None:
        return None, f"no {label} version of {rel} (new file, first commit or a shallow clone): why not checked"
    try:
        old = parse_baseline(previous, f"{label}:{rel}")
    except (GuardError, ValueError):
        return None, f"{label}:{rel} does not parse: why not checked"
    new = parse_baseline(current, path)
    if numbers(old) != numbers(new) and old["why"].strip() == new["why"].strip():
        return (
            f"{rel}: its counts differ from {label}'s but its 'why' is unchanged ({new['why']!r}); "
            f"re-record with {RECORD} saying why they changed",
            "",
        )
    return None, ""


# ---------------------------------------------------------------------------
# Comparing


def compare(baseline: dict[str, Any], measured: dict[str, dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(report lines, failures): one failure per scenario that rose more than THRESHOLD."""
    lines, failures = [], []
    for name, now in measured.items():
        before, after = baseline["scenarios"][name]["per_op"], now["per_op"]
        change = (after - before) / before
        verdict = "ok"
        if change > THRESHOLD:
            verdict = "ROSE"
            failures.append(
                f"{name} ({SHAPES[name][0] if name in SHAPES else name}): {before:,} -> {after:,} "
                f"instructions per operation ({change:+.2%}, more than {THRESHOLD:.0%})"
            )
        elif change < -THRESHOLD:
            verdict = f"fell: re-record to keep it ({RECORD})"
        lines.append(f"  {name:<16} {before:>12,} -> {after:>12,} instructions/op  {change:+7.2%}  {verdict}")
    return lines, failures


def _selected(args: argparse.Namespace, baseline: dict[str, Any] | None) -> list[str]:
    names = args.scenario or (list(baseline["scenarios"]) if baseline else list(SHAPES))
    unknown = [name for name in names if name not in SHAPES and not (baseline and name in baseline["scenarios"])]
    if unknown:
        raise GuardError(f"unknown scenario(s) {', '.join(unknown)}; the guard's are {', '.join(SHAPES)}")
    return names


def _sizes(args: argparse.Namespace, names: list[str], baseline: dict[str, Any] | None) -> dict[str, tuple[int, int]]:
    if args.sizes:
        n1, n2 = (int(part) for part in args.sizes.split(","))
        if not 0 < n1 < n2:
            raise GuardError("--sizes N1,N2 needs 0 < N1 < N2")
        return {name: (n1, n2) for name in names}
    sizes = {}
    for name in names:
        if baseline and name in baseline["scenarios"]:
            sizes[name] = tuple(baseline["scenarios"][name]["n"])
        else:
            sizes[name] = SHAPES[name][1]
    return sizes


def run_check(args: argparse.Namespace) -> int:
    baseline = load_baseline(args.baseline)
    status = 0
    problem, note = history_problem(args.baseline)
    if problem:
        print(f"perf guard: FAIL: {problem}")
        status = 1
    elif note:
        print(f"perf guard: note: {note}")
    here, recorded = interpreter(), baseline.get("recorded_on", {})
    described = f"{recorded.get('implementation')} {recorded.get('python')} on {recorded.get('machine')}"
    if not comparable(recorded, here):
        print(
            f"perf guard: the baseline was recorded on {described}, this is {here['implementation']} "
            f"{here['python']} on {here['machine']}: instruction counts of different interpreters are not "
            f"comparable, so nothing was compared. Re-record on this interpreter ({RECORD})."
        )
        return max(status, 3 if args.strict else 0)
    if recorded.get("python") != here["python"]:
        print(f"perf guard: note: baseline recorded on Python {recorded.get('python')}, comparing on {here['python']}")
    names = _selected(args, baseline)
    missing = [name for name in names if name not in baseline["scenarios"]]
    if missing:
        raise GuardError(f"the baseline has no count for {', '.join(missing)}: record it ({RECORD})")
    measured = count_all(names, _sizes(args, names, baseline), args.jobs)
    lines, failures = compare(baseline, measured)
    print(f"perf guard: instructions per operation, compiled core, baseline {args.baseline} (why: {baseline['why']})")
    print("\n".join(lines))
    if failures:
        print(f"perf guard: FAIL: {len(failures)} scenario(s) rose more than {THRESHOLD:.0%}:")
        for failure in failures:
            print(f"  {failure}")
        print(f"A deliberate rise: re-record the baseline in the same commit, saying why: {RECORD}")
        return 1
    if status == 0:
        print(f"perf guard: ok ({len(names)} scenarios within {THRESHOLD:.0%} of the baseline)")
    return status


def run_record(args: argparse.Namespace) -> int:
    why = (args.why or "").strip()
    if not why:
        raise GuardError("record needs --why: what changed the counts (it is the commit's answer to the guard)")
    old = load_baseline(args.baseline) if os.path.exists(args.baseline) else None
    if old is not None and old["why"].strip() == why:
        raise GuardError(f"--why repeats the baseline's current reason ({why!r}): say why the counts change now")
    names = _selected(args, None if args.scenario is None else old)
    measured = count_all(names, _sizes(args, names, None), args.jobs)
    scenarios = dict(old["scenarios"]) if (old is not None and args.scenario) else {}
    for name, result in measured.items():
        scenarios[name] = {"shape": SHAPES[name][0], "per_op": result["per_op"], "n": result["n"]}
    baseline = {
        "why": why,
        "recorded_on": {**interpreter(), "valgrind": valgrind_version()},
        "threshold": THRESHOLD,
        "how": "valgrind --tool=callgrind instructions per operation of the compiled core: (I(n2) - I(n1)) / (n2 - n1)"
        " of the scenario's timed part (amrita_sense.bench.perf_guard)",
        "scenarios": scenarios,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.baseline)), exist_ok=True)
    text = re.sub(r"\[\s*(\d+),\s*(\d+)\s*\]", r"[\1, \2]", json.dumps(baseline, indent=2))  # "n": [n1, n2]
    with open(args.baseline, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    for name, result in measured.items():
        print(f"  {name:<16} {result['per_op']:>12,} instructions/op  (n {result['n']}: {result['instructions']})")
    print(f"perf guard: recorded {args.baseline}; commit it with the change it explains")
    return 0


def run_measure(args: argparse.Namespace) -> int:
    names = _selected(args, None)
    for name, result in count_all(names, _sizes(args, names, None), args.jobs).items():
        print(f"  {name:<16} {result['per_op']:>12,} instructions/op  (n {result['n']}: {result['instructions']})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m amrita_sense.bench.perf_guard", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command")
    counted = sub.add_parser("_count", help=argparse.SUPPRESS)
    counted.add_argument("name")
    counted.add_argument("sizes", type=int, nargs="+")
    counted.add_argument("--out", required=True)
    for name, text in (
        ("check", "compare with the baseline (the default)"),
        ("record", "re-record the baseline"),
        ("measure", "print the counts"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("--baseline", default=None, help=f"the baseline file (default: the checkout's {BASELINE})")
        command.add_argument("--scenario", action="append", help="only this scenario (repeatable)")
        command.add_argument("--sizes", help="N1,N2: the two sizes (default: the baseline's, else the guard's)")
        command.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 2), help="processes at a time")
        if name == "check":
            command.add_argument("--strict", action="store_true", help="fail (exit 3) on another interpreter")
        if name == "record":
            command.add_argument("--why", required=True, help="why the counts change (required, not empty)")
    args = parser.parse_args(["check", *(argv or [])] if not argv or argv[0].startswith("-") else argv)
    if args.command == "_count":
        _count(args.name, args.sizes, args.out)
        return 0
    args.baseline = args.baseline or default_baseline()
    try:
        return {"check": run_check, "record": run_record, "measure": run_measure}[args.command](args)
    except GuardError as exc:
        print(f"perf guard: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
