"""WAIT, SLEEP and SLEEP_UNTIL: nodes that park a checkpointed run until a message or a time.

    graph = NodeCompose(draft, WAIT("decision", timeout=86400), settle, SLEEP(3600), remind).render()
    interp = WorkflowInterpreter(graph, extra_args=(...))
    interp.checkpointing = Checkpointing(store, "exp-7", codec=pickle, graph="approval")
    await interp.run()            # returns once the run parks at the WAIT (status "waiting")
    store.send("exp-7", "decision", "approve")   # from anywhere that shares the store
    # a Waker(store, graphs={"approval": build_graph}) resumes the run and delivers the message

A wait is one node. When the run first reaches it, the node records the wait on the interpreter
(its topic, and when its timer ends: SLEEP's time, WAIT's timeout) and parks the run: the run ends
with its pointer on the main-loop step that waits (no halt), and the checkpointing policy saves it
with the wait (status ``"waiting"``). The run is out of memory from then on. A `Waker` claims it
when it is due (a message on its topic is kept in the store, or its timer passed), restores it and
runs it: the step runs again, and the wait node now

- WAIT: consumes the delivered `Message`: it is put into the interpreter's injection pools (the
  next nodes get it by type, replacing an earlier message) and sent into `pc.object_io`'s reverse
  channel (`pc.object_io.drain_producer_input()` reads it), and the node returns it; with no
  message and its timeout passed it raises `WaitTimeout` naming the topic (Try/CATCH and node
  policies handle it);
- SLEEP / SLEEP_UNTIL: returns once its time has come;
- otherwise (resumed early, nothing delivered) parks again.

A wait inside a sub-call of the main loop (a Try body, an IF branch, a WHILE body) parks the whole
main-loop step: the resumed run executes that step again from its start (a Try's FINALLY ran at the
park as well, a WHILE evaluates its condition again); loops that wait on each turn are best written
with NATIVE_WHILE / NATIVE_DO, whose bodies are steps of their own. With `codec=None` the pools are
not checkpointed: a run restored between a WAIT and the node taking its `Message` no longer has it.
A wait needs a run with a `Checkpointing(..., graph=name)` policy, in the top interpreter (not in a
FUN_BLOCK / BATCH_RUN sub-interpreter): elsewhere it raises `WaitError` saying what to pass. Graphs
without waits pay nothing: the core's loop does not know about them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from amrita_sense.durable.checkpointing.policy import Parked
from amrita_sense.durable.errors import WaitError, WaitTimeout
from amrita_sense.instructions._support import NODE_SLOTS
from amrita_sense.node.core import BaseNode
from amrita_sense.runtime.workflow import WorkflowInterpreter

_KIND_WAIT, _KIND_SLEEP, _KIND_UNTIL = "wait", "sleep", "until"


@dataclass(frozen=True)
class Message:
    """A message delivered to a run's WAIT: injected into the next nodes by type, and readable from
    the run's `object_io` (`drain_producer_input()`)."""

    topic: str
    payload: Any
    """The payload `store.send` was given, decoded by the run's codec (None: plain JSON data)."""
    message_id: str
    """Unique per run: the same id sent twice is kept (and delivered) once."""
    sent_at: float
    """When it was sent (seconds since the epoch)."""


def _positive_seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} is a number of seconds, not {type(value).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{what} is a positive finite number of seconds, not {value!r}")
    return float(value)


def _epoch(when: Any) -> float:
    if isinstance(when, datetime):
        if when.tzinfo is None or when.utcoffset() is None:
            raise ValueError("SLEEP_UNTIL needs an aware datetime (with a tzinfo), not a naive one")
        return when.timestamp()
    if isinstance(when, bool) or not isinstance(when, (int, float)):
        raise TypeError(f"SLEEP_UNTIL takes epoch seconds or an aware datetime, not {type(when).__name__}")
    if not math.isfinite(when):
        raise ValueError(f"SLEEP_UNTIL takes finite epoch seconds, not {when!r}")
    return float(when)


class WaitNode(BaseNode):
    """The node of a WAIT / SLEEP / SLEEP_UNTIL (see the module docstring)."""

    __slots__ = (*NODE_SLOTS, "_kind", "_seconds", "_topic")

    def __init__(self, kind: str, topic: str | None, seconds: float | None) -> None:
        self._kind = kind
        self._topic = topic
        self._seconds = seconds
        tag = f"WAIT::{topic}" if kind == _KIND_WAIT else f"SLEEP::{kind}"
        self._init(self._wait, tag, False, True)

    @property
    def __sdb_dis__(self) -> str:
        if self._kind == _KIND_WAIT:
            return f"WAIT {self._topic!r}" + ("" if self._seconds is None else f" timeout={self._seconds}")
        return f"SLEEP {self._seconds}" if self._kind == _KIND_SLEEP else f"SLEEP_UNTIL {self._seconds}"

    @property
    def __sdb_cmt__(self) -> str:
        return "park the run until a message arrives" if self._kind == _KIND_WAIT else "park the run until a time"

    def __call__(self, pc: WorkflowInterpreter) -> Any:
        return self._wait(pc)

    def _due_at(self, now: float) -> float | None:
        if self._kind == _KIND_UNTIL:
            return self._seconds
        return None if self._seconds is None else now + self._seconds

    async def _wait(self, pc: WorkflowInterpreter) -> Any:
        policy = _policy_of(pc, self.__sdb_dis__)
        pending = pc._durable_wait
        if pending is None or pending[0] != self._topic:  # first arrival: park
            pc._durable_wait = (self._topic, self._due_at(time.time()))
            raise Parked(f"parked at {self.__sdb_dis__}")
        due_at = pending[1]
        if self._kind == _KIND_WAIT:
            message = _take(policy, self._topic)
            if message is not None:
                pc._durable_wait = None
                await _hand_over(pc, message)
                _resumed(pc, policy)
                return message
            if due_at is not None and time.time() >= due_at:
                pc._durable_wait = None
                raise WaitTimeout(
                    f"run {policy.run_id!r}: no message on topic {self._topic!r} within {self._seconds} seconds"
                )
        elif due_at is None or time.time() >= due_at:
            pc._durable_wait = None
            _resumed(pc, policy)
            return None
        raise Parked(f"parked again at {self.__sdb_dis__}")  # resumed early: wait on


def _resumed(pc: Any, policy: Any) -> None:
    """The wait ends on a resumed run. When it is the whole main-loop step (not inside a block's
    step), that step did nothing else: its one effect, the message taken (marked delivered by the
    next save) or the timer passed, is recorded by the run's next save, and the policy skips the
    save after it (a crash before the next save resumes the run from its parked checkpoint, with
    the same message: the same as a crash right after that save would have, one write fewer)."""
    if len(pc._pointer.base_addr) == 1:
        policy._wait_step_ends = True


def _policy_of(pc: Any, what: str) -> Any:
    """The run's `Checkpointing` policy with a graph name, or `WaitError` saying what is missing."""
    if pc._top_interpreter is not None:
        raise WaitError(
            f"{what} inside a FUN_BLOCK / BATCH_RUN sub-interpreter: a wait parks the whole run, so it must be "
            f"a step of the top interpreter's graph"
        )
    policy = pc._checkpoints
    if policy is None:
        raise WaitError(
            f"{what} needs a checkpointed run: set interp.checkpointing = Checkpointing(store, run_id, graph=NAME) "
            f"(the run leaves memory while it waits; a Waker given NAME resumes it)"
        )
    if getattr(policy, "graph", None) is None:
        raise WaitError(
            f"{what} in run {policy.run_id!r}: its Checkpointing policy has no graph name: pass "
            f"Checkpointing(..., graph=NAME) so that a Waker given NAME can resume the run"
        )
    return policy


def _take(policy: Any, topic: str | None) -> Message | None:
    """The first message handed over for `topic` (removed from the inbox), or None."""
    inbox = policy._inbox
    for i, message in enumerate(inbox):
        if message.topic == topic:
            del inbox[i]
            return message
    return None


async def _hand_over(pc: Any, message: Message) -> None:
    """Deliver `message` into the run: the pools (by type, replacing an earlier Message), the
    stream's reverse channel, and the policy's list of messages its next save marks delivered."""
    pc._ava_args = tuple(arg for arg in pc._ava_args if not isinstance(arg, Message)) + (message,)
    pc.rehash_args()
    pc._checkpoints._delivered.append(message.message_id)
    await pc.object_io.send_to_producer(message)


def WAIT(topic: str, timeout: float | None = None) -> WaitNode:
    """Park the run until a message on `topic` is sent to it (`store.send(run_id, topic, payload)`).

    The resumed run gets the `Message` injected by type into the next nodes and in its
    `object_io`'s reverse channel. With `timeout` (seconds), a run with no message by then raises
    `WaitTimeout` at this step. Needs `Checkpointing(..., graph=NAME)` (see the module docstring).
    """
    if not isinstance(topic, str):
        raise TypeError(f"WAIT's topic is a non-empty string, not {type(topic).__name__}")
    if not topic or len(topic) > 512:
        raise ValueError(f"WAIT's topic is a non-empty string of at most 512 characters, not {topic!r:.60}")
    return WaitNode(_KIND_WAIT, topic, None if timeout is None else _positive_seconds(timeout, "WAIT's timeout"))


def SLEEP(seconds: float) -> WaitNode:
    """Park the run for `seconds` (a durable timer: the run leaves memory; a `Waker` resumes it once
    the time passed, never before). Needs `Checkpointing(..., graph=NAME)`."""
    return WaitNode(_KIND_SLEEP, None, _positive_seconds(seconds, "SLEEP's seconds"))


def SLEEP_UNTIL(when: float | datetime) -> WaitNode:
    """Park the run until `when` (seconds since the epoch, or an aware `datetime`); a time already
    passed resumes at once. Needs `Checkpointing(..., graph=NAME)`."""
    return WaitNode(_KIND_UNTIL, None, _epoch(when))


__all__ = ["SLEEP", "SLEEP_UNTIL", "WAIT", "Message", "WaitNode"]
