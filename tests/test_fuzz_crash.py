"""The crash fuzzer: random sequences of public and kept-private calls with random values.

Each sequence (hypothesis) runs in a worker process on the compiled core and in one on the pure
build (`support/fuzz_worker.py`). The test fails when a worker dies (a signal: the compiled core crashed),
when a call or a whole sequence does not finish (a hang), and when the two builds disagree on the
outcome of a call ("ok" or the exception class).

The short version runs in every compiled-core pass of the suite (derandomized, a few seconds).
The long one is on demand:

    AMRITA_SENSE_FUZZ=long PYTHONPATH=src .venv/bin/python -m pytest -q tests/test_fuzz_crash.py

(`AMRITA_SENSE_FUZZ_EXAMPLES=N` sets the number of sequences; the long run draws new ones each
time, `--hypothesis-seed=S` repeats one.)
"""

from __future__ import annotations

import inspect
import json
import os
import select
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import amrita_sense

CORE = amrita_sense.IMPLEMENTATION
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from support.fuzz_worker import ACTIONS, SCRIPT_NODES  # noqa: E402
from support.runtime_path import RUNTIME_DIR  # noqa: E402

LONG = os.environ.get("AMRITA_SENSE_FUZZ", "") == "long"
EXAMPLES = int(os.environ.get("AMRITA_SENSE_FUZZ_EXAMPLES", "3000" if LONG else "30"))
SEQUENCE_TIMEOUT = 60.0  # seconds for one sequence in one worker: beyond it the worker hangs

pytestmark = [
    pytest.mark.skipif(CORE != "cython", reason="runs in the compiled-core pass: it drives both builds itself"),
    pytest.mark.skipif(sys.platform == "win32", reason="waits on the workers' pipes with select()"),
]

# ----- what a sequence is made of ---------------------------------------------------------------

VECTOR_ACTIONS = [
    "offset",
    "offset_far",
    "near_to",
    "far_to",
    "pv_pop",
    "append",
    "clear",
    "copy",
    "add",
    "sub",
    "getitem",
    "setitem",
    "delitem",
    "len",
    "iter",
    "bool",
    "eq",
    "hash",
    "repr",
    "set_base",
    "get_base",
    "new_pv",
]
STACK_ACTIONS = ["push", "pop", "clear", "resize", "copy", "set_stack", "set_ovf", "len", "bool", "repr", "new_stack"]
INTERP_ACTIONS = [
    "set_attr",
    "get_attr",
    "jump_to",
    "jump_near",
    "jump_offset",
    "jump_far_ptr",
    "jump_offset_far",
    "jump_to_top",
    "jump_offset_top",
    "unmarkup",
    "rebase_ptr",
    "rebase_context",
    "dump",
    "reset",
    "advance_pointer",
    "resume_from_halt",
    "find_node_alias",
    "rehash_args",
    "run",
    "step_by",
    "call_sub",
    "call_offset",
    "call_near",
    "call_offset_far",
    "fork",
    "new_interp",
    "terminate",
    "wait_all_forks",
]
TARGETS = {
    "pv": VECTOR_ACTIONS,
    "ptr": VECTOR_ACTIONS,
    "stack": STACK_ACTIONS,
    "rets": STACK_ACTIONS,
    "ctxs": STACK_ACTIONS,
    "interp": INTERP_ACTIONS,
    "lock": ["locked", "owned"],
    "stream": ["yield_response", "send_to_producer", "drain", "resume", "queue_done"],
}
KEPT_ATTRIBUTES = [
    "_pointer",
    "_ret_addr_stack",
    "_context_stack",
    "_flags",
    "_interpret_lock",
    "_panic_exc",
    "_waiter_fut",
    "_middleware",
    "_yield_interval",
    "_ava_args",
    "_ava_kwargs",
    "object_io",
    "if_flag",
    "flags",
    "is_running",
    "jump_marked",
    "context_stack",
    "pending_stop",
    # the Python layer's fields, kept in the core's struct since issue 12
    "_ava_args_v",
    "_ava_kwargs_v",
    "_exc_ignored",
    "_shape",
    "_graph",
    "_object_io",
    "_signal",
    "_parent_interpreter",
    "_top_interpreter",
    "_sub_interpreters",
    "_sub_interpreters_all",
    "_waiter",
    "_plans",
    "_di_cache",
    "_di_record",
    "_args_hash",
    "_dep_store_v",
    "_glob_lock_v",
    "_interpreter_id",
    "_lifecycles_v",
    "_provider_values",
    "_values_key",
    "_run_task",
    "_prog",
]


def _arity(action: str) -> int:
    return len(inspect.signature(ACTIONS[action]).parameters) - 2


INTS = st.sampled_from([0, 1, 2, 3, -1, -2, 9, 2**31, 2**63, -(2**63) - 1, 10**20]) | st.integers(-3, 12)
SCALARS = st.none() | st.booleans() | INTS | st.sampled_from(["", "x", "mid", "fn", "_pointer"])
ADDRESSES = st.lists(st.integers(-2, 10), max_size=4)
MADE = st.sampled_from(["obj", "exc", "exc_class", "ctx", "lock", "stream", "graph", "middleware", "future"])
LEAVES = st.one_of(
    st.tuples(st.just("lit"), SCALARS | ADDRESSES | st.just({"a": 1})),
    st.tuples(st.just("float"), st.sampled_from(["nan", "inf", "-inf", 1.5, 0.0])),
    st.tuples(st.sampled_from(["pv", "stack", "interp"]), st.integers(0, 3)),
    st.tuples(MADE, st.none()),
)
VALUES = st.recursive(
    LEAVES, lambda inner: st.tuples(st.sampled_from(["list", "tuple"]), st.lists(inner, max_size=3)), max_leaves=5
)


# (target, action) pairs, the ones that change what the compiled core reads listed more than once
PAIRS = [(target, action) for target, actions in TARGETS.items() for action in actions]
PAIRS += [("ptr", a) for a in ("clear", "pv_pop", "offset", "near_to", "set_base", "far_to", "append")] * 3
PAIRS += [
    ("interp", a)
    for a in (
        "run",
        "step_by",
        "reset",
        "set_attr",
        "jump_to",
        "rebase_ptr",
        "jump_offset",
        "jump_near",
        "call_sub",
        "advance_pointer",
    )
] * 3
PAIRS += [("rets", a) for a in ("push", "pop", "set_stack")] * 2


@st.composite
def calls(draw):
    target, action = draw(st.sampled_from(PAIRS))
    values = [draw(VALUES) for _ in range(_arity(action))]
    if action in ("set_attr", "get_attr"):
        values[0] = ("lit", draw(st.sampled_from(KEPT_ATTRIBUTES)))
    return [target, draw(st.integers(0, 3)), action, *values]


SEQUENCES = st.fixed_dictionaries(
    {
        "loop": st.sampled_from(["asyncio", "uvloop"]),
        "calls": st.lists(calls(), min_size=1, max_size=12),
        "scripts": st.dictionaries(
            st.integers(0, SCRIPT_NODES - 1).map(str), st.lists(calls(), max_size=4), max_size=4
        ),
    }
)

# ----- the two workers ------------------------------------------------------------------------------


class Worker:
    """A worker process on one build; restarted after it died or hung."""

    def __init__(self, build: str):
        self.build = build
        self.proc: subprocess.Popen | None = None
        self.log = tempfile.TemporaryFile()

    def _env(self) -> dict:
        env = dict(os.environ)
        env.pop("AMRITA_SENSE_NO_EXTENSIONS", None)
        env.pop("AMRITA_SENSE_REQUIRE_EXTENSIONS", None)
        env["AMRITA_SENSE_REQUIRE_EXTENSIONS" if self.build == "cython" else "AMRITA_SENSE_NO_EXTENSIONS"] = "1"
        env["PYTHONPATH"] = RUNTIME_DIR
        return env

    def _start(self) -> subprocess.Popen:
        self.log.seek(0)
        self.log.truncate()
        return subprocess.Popen(
            [sys.executable, "-X", "faulthandler", str(HERE / "support" / "fuzz_worker.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            env=self._env(),
            text=True,
        )

    def run(self, sequence: dict) -> list[str]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        self.proc.stdin.write(json.dumps(sequence) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], SEQUENCE_TIMEOUT)
        line = self.proc.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        self._fail(sequence, "did not answer (a hang)" if not ready else "died")

    def _fail(self, sequence: dict, what: str) -> None:
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        self.log.seek(0)
        tail = self.log.read().decode(errors="replace")[-3000:]
        pytest.fail(f"the {self.build} worker {what} (exit {proc.returncode}) on\n{json.dumps(sequence)}\n{tail}")

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(10)
        self.log.close()


@pytest.fixture(scope="module")
def workers():
    pair = Worker("cython"), Worker("python")
    yield pair
    for worker in pair:
        worker.close()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not LONG,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
@given(sequence=SEQUENCES)
def test_no_call_sequence_crashes_hangs_or_differs_between_the_builds(workers, sequence):
    compiled, pure = (worker.run(sequence) for worker in workers)
    assert "HANG" not in compiled and "HANG" not in pure, sequence
    assert compiled == pure, sequence
