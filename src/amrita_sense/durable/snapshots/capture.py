"""Taking a snapshot: the engine state of an interpreter, at a point where no node is running.

Where a snapshot can be taken (`position` in `SnapshotInfo`):

- ``idle``: no run in flight: before the first run, after a run ended, after a
  panic, after a SUSPEND / `InterruptKeepContext` halt;
- ``between``: in a run, between two nodes: parked at the between-node gate
  (`PC_CHECKPOINT`), at a `run_step_by()` yield (the step's node has run; the
  snapshot holds the state the loop will have after it moves on, ``idle`` when
  that step was the run's last), or in a run's own bookkeeping;
- ``gate``: parked at a node's own suspend gate (`object_io._wait_for_continue(tag)`
  of a main-loop node), before the node runs; or a node with a policy backing off
  between two attempts (the restored run runs the node again, at its next attempt);
- ``step``: inside a middleware, from the run's own task, before the middleware
  calls `_call()` (taken after it, the restored run runs that node again: the
  at-least-once rule);
- ``nested``: the current node is a FUN_BLOCK or BATCH_RUN step whose
  sub-interpreters are themselves at one of these points (or have returned).

Anywhere else (a node is running, a sub-call such as an IF condition is in
progress, an external `call_sub(..., interrupt=True)` holds the lock)
`snapshot()` raises `SnapshotUnavailable`.

The engine document (format version 1) is a JSON object::

    {"interp": STATE, "codec": name of the codec or null, "trace": TRACE (optional),
     "identity": [ANCHOR, ...] (optional), "durable": DURABLE (optional)}

    DURABLE = {"steps": int (the main-loop steps the checkpointed run completed: `step_key`),
               "wait": [topic or null, due_at or null] or null (the WAIT / SLEEP the run is
               parked at, `amrita_sense.durable.waits`)}: written when either is set (readers
               that predate it ignore the key)

    ANCHOR: per distinct address of the root STATE, the row of the graph it hangs on, named
            without its address, so that the run can be moved onto an edited graph (written
            since migration support; `amrita_sense.durable.snapshots.migrate` describes it; readers
            that predate it ignore the key)

    TRACE = {"traceparent": W3C traceparent of the run's span, "tracestate": str (optional),
             "parent": traceparent of that span's parent (optional)}: the run's trace, written
             while telemetry is on (`amrita_sense.telemetry`), continued by the restored run

    STATE = {
      "id": the interpreter id (hex; a restored root interpreter keeps it),  "position": see above,
      "parked": the gate tag it is parked at, or null,
      "ptr": [int, ...]  (the program counter; [] when the run has ended),
      "flags": int (IF=1, HLT=2, JMP=4),  "stop": bool (a pending terminate()),
      "ret": STACK (the return-address stack),
      "ctx": {"limit": int, "items": [CONTEXT, ...]} (the context stack),
      "stacks": [STACK, ...] (return stacks captured by PUSH_CONTEXT(exclude_stack=False)),
      "exc_ignored": ["module:QualName", ...] (the pass-through exception classes),
      "panic": EXCEPTION or null,
      "pools": index of the user blob holding (extra_args, extra_kwargs), or null,
      "memo": [[address, address], ...] (return addresses INT / PUSH_CONTEXT(None) computed and kept),
      "attempts": [[address, int, float or null], ...] (optional: per node with a policy whose step is in
                  flight, the failed attempts and the wall-clock end of the backoff before the next one),
      "children": null or {"kind": "fun_block" | "batch", "at": address of the step,
                           "items": [{"standing": "running" | "returned" | "pending",
                                      "graph": fingerprint, "state": STATE}, ...]}
    }
    STACK = {"limit": int, "items": [[int, ...], ...]}   (bottom first)
    CONTEXT = {"ptr": [int, ...], "flags": int, "exc_ignored": [names] or null (the interpreter's),
               "stack": null | -1 (the live return stack) | index into "stacks",
               "panic": EXCEPTION or null, "pools": null | "live" | user blob index,
               "extra": null or user blob index}
    EXCEPTION = {"type": "module:QualName", "args": [plain values] or null, "message": str,
                 "traceback": str, "blob": user blob index or null}
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from amrita_sense import core as _core
from amrita_sense.durable.errors import SnapshotUnavailable
from amrita_sense.durable.snapshots import format as fmt
from amrita_sense.durable.snapshots import node_state
from amrita_sense.durable.snapshots.fingerprint import GraphOutline, graph_fingerprint, outline_of_program
from amrita_sense.durable.snapshots.migrate import anchors_text, pointer_anchors_text
from amrita_sense.durable.snapshots.panic import encode_exception, type_name
from amrita_sense.runtime import observe as _observe

# the save path's hot part, of the build the core loaded from (`_plain_snapshot`)
if TYPE_CHECKING or _core.IMPLEMENTATION == "cython":
    from amrita_sense.durable.snapshots import _plain_snapshot as _plain
else:
    from amrita_sense.durable.snapshots import pure_plain_snapshot as _plain

_plain_snapshot = _plain.plain_snapshot
_pack = _plain.pack
"""`format.encode`, the same bytes (`_plain_snapshot.pack`)."""

IDLE, BETWEEN, GATE, STEP, NESTED = "idle", "between", "gate", "step", "nested"
MAX_ADDRESS = 4096
"""The longest address (pointer depth) a snapshot stores."""


def take_snapshot(interp: Any, codec: Any = None, seal: Any = None) -> bytes:
    """`interp.snapshot(codec)`: the engine state as bytes (see the module docstring); packed signed
    with `seal` (`format.encode`). A run between its nodes with nothing on its stacks is written and
    packed in one call (`_plain_snapshot`, compiled in the compiled build); any other the general way."""
    observer = _observe.current
    carrier = None if observer is None else observer.trace_carrier(interp)
    if not carrier:
        packed = _plain_snapshot(interp, codec, seal)
        if packed is not None:
            return packed
    blobs: list[bytes] = []
    prog = interp._prog
    outline = _outline(interp) if prog.successor is not None else outline_of_program(prog)
    plain = None if carrier else _plain_document(interp, outline, codec, blobs)
    if plain is not None:
        status, document = plain
    else:
        state, parked = _capture(interp, outline, codec, blobs, with_pools=True)
        document = _document_text(state, codec, anchors_text(outline, state), carrier, _durable_document(interp))
        status = _status(interp, state["position"], state["ptr"], parked)
    return _pack(status, outline.fingerprint, document, outline.packed, blobs, seal)


def _durable_document(interp: Any) -> dict | None:
    """DURABLE of the root interpreter, or None when it has no step count and no wait."""
    steps = getattr(interp, "_durable_steps", 0)
    wait = getattr(interp, "_durable_wait", None)
    if not steps and wait is None:
        return None
    return {"steps": int(steps), "wait": None if wait is None else [wait[0], wait[1]]}


def _durable_text(interp: Any) -> str:
    """`,"durable":DURABLE` as `_document_text` writes it, or "" when there is none; a run between
    its nodes (steps counted, no wait) written straight."""
    steps = interp._durable_steps
    wait = interp._durable_wait
    if wait is None and type(steps) is int:
        return f',"durable":{{"steps":{steps},"wait":null}}' if steps else ""
    durable = _durable_document(interp)
    return "" if durable is None else ',"durable":' + fmt.json_text(durable)


_string_text = _plain.string_text
"""`fmt.json_text(value)` of a string, kept (`_plain_snapshot.string_text`)."""


def _plain_document(interp: Any, outline: GraphOutline, codec: Any, blobs: list[bytes]) -> tuple[str, bytes] | None:
    """`(status, engine document)` of a run with nothing on its stacks (no return address, context,
    panic, node state or step in flight: a chain between its nodes), written straight as text;
    None for any other run. The text is exactly the one `_capture` and `_document_text` write
    (tests/test_durable_snapshot.py compares them)."""
    if (
        interp._ret_addr_stack.stack
        or interp._context_stack.stack
        or interp._panic_exc is not None
        or outline.memo_rows
        or outline.attempt_rows
    ):
        return None
    # `position_of` between two nodes (running, the lock free or the step taken), without the call
    if (interp._interpret_lock.owner is None or interp._stepped) and interp.is_running:
        position = BETWEEN
    else:
        position = position_of(interp)
        if position == NESTED:
            return None
    pointer = interp._pointer
    if not interp._stepped and pointer._items is None:  # `_pointer_and_flags` of a bound pointer, inline
        ptr, flags = list(pointer._prog.addrs[pointer._row]), interp._flag_bits
    else:
        ptr, flags, ends = _pointer_and_flags(interp)
        if ends:
            position = IDLE
    tag = interp._parked_tag
    if codec is None:
        pools, codec_text = None, "null"
    else:  # `_pools_blob`, inline
        pools = _user_blob(
            (tuple(interp._ava_args_v[1:]), dict(interp._ava_kwargs_v)), codec, blobs, "the injection pools"
        )
        codec_text = _codec_text(codec)
    id_text = _string_text(interp._interpreter_id or interp.id)
    names_text = _class_names_text(interp._exc_ignored)
    # `pointer_anchors_text`, the graph's kept text found without the two calls
    anchors = outline.anchor_texts.get((tuple(ptr),)) or pointer_anchors_text(outline, ptr)
    steps = interp._durable_steps
    if interp._durable_wait is None and type(steps) is int:  # `_durable_text`, the run between its nodes
        durable = f',"durable":{{"steps":{steps},"wait":null}}' if steps else ""
    else:
        durable = _durable_text(interp)
    text = "".join(
        (
            '{"interp":{"id":',
            id_text,
            ',"position":"',
            position,
            '","parked":',
            "null" if tag is None else fmt.json_text(tag),
            ',"ptr":[',
            ",".join(map(str, ptr)),
            '],"flags":',
            str(flags),
            _middle_text(
                bool(interp._pending_stop),
                int(interp._ret_addr_stack.ovf),
                int(interp._context_stack.ovf),
                names_text,
                pools,
                codec_text,
            ),
            anchors,
            durable,
            "}",
        )
    )
    # `_status`: a run between its nodes (no panic here, not parked) runs
    status = "running" if tag is None and position == BETWEEN else _status(interp, position, ptr, tag is not None)
    return status, text.encode()


_middle_text = _plain.middle_text
"""The plain document's text from `,"stop":` to `,"identity":`, kept for the fields asked last
(`_plain_snapshot.middle_text`)."""


_codec_text = _plain.codec_text_of
"""`fmt.json_text(_codec_name(codec))`, kept for the codec named last (`_plain_snapshot.codec_text_of`)."""


def _document_text(state: dict, codec: Any, identity: str, carrier: dict | None, durable: dict | None = None) -> bytes:
    """The engine document as JSON text; `identity` comes already encoded (it is kept per graph)."""
    parts = [
        '{"interp":',
        fmt.json_text(state),
        ',"codec":',
        fmt.json_text(_codec_name(codec)),
        ',"identity":',
        identity,
    ]
    if carrier:
        parts += [',"trace":', fmt.json_text(carrier)]
    if durable is not None:
        parts += [',"durable":', fmt.json_text(durable)]
    parts.append("}")
    return "".join(parts).encode()


_codec_name = _plain.codec_name


def _status(interp: Any, position: str, ptr: list[int], parked: bool) -> str:
    if interp._panic_exc is not None:
        return "panicked"
    if parked:
        return "suspended"
    if position == IDLE and getattr(interp, "_durable_wait", None) is not None:
        return "waiting"  # parked at a WAIT / SLEEP (amrita_sense.durable.waits)
    if position != IDLE:
        return "running"  # even with an empty pointer (a jump to nowhere): the run goes on at [0]
    if interp._flag_bits & _core.FLAG_HLT:
        return "halted"
    return "ready" if ptr else "finished"


# ----- where the run stands ------------------------------------------------------------------


def position_of(interp: Any) -> str:
    """Where `interp` stands (IDLE, BETWEEN, GATE, STEP, NESTED); `SnapshotUnavailable` inside a node."""
    owner = interp._interpret_lock.owner
    if not interp.is_running:
        if owner is not None:
            raise SnapshotUnavailable("an injected call (call_sub(..., interrupt=True)) is running")
        return IDLE
    if owner is None or interp._stepped:
        return BETWEEN
    if owner is not interp._run_task:
        raise SnapshotUnavailable("an injected call (call_sub(..., interrupt=True)) is running")
    if interp._subcalls or interp._outer_interpreting:
        raise SnapshotUnavailable("a node is running a sub-call (a condition, a body, a Try part...)")
    node = _node_at_pointer(interp)
    if interp._parked_tag is not None and interp._parked_tag == getattr(node, "tag", None):
        return GATE
    if node is not None and node_state.backing_off(node, interp):
        return GATE
    if interp._middleware is not None and interp._node_calls == 0 and _current_task() is owner:
        return STEP
    if node is not None and node_state.step_children(node, interp) is not None:
        return NESTED
    raise SnapshotUnavailable("a node is running: take the snapshot at a suspend point or between nodes")


def _current_task() -> Any:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


def _node_at_pointer(interp: Any) -> Any:
    ptr = interp._pointer
    prog = interp._prog
    if ptr._items is None and ptr._prog is prog:
        return prog.nodes[ptr._row]
    row, exact = prog.locate(ptr._items)
    return prog.nodes[row] if row >= 0 and exact else None


# ----- capturing ---------------------------------------------------------------------------------


def _capture(interp: Any, outline: GraphOutline, codec: Any, blobs: list[bytes], with_pools: bool) -> tuple[dict, bool]:
    """`(STATE, parked anywhere in the tree)` of `interp`, which runs `outline`'s table; raises
    `SnapshotUnavailable` inside a node."""
    position = position_of(interp)
    ptr, flags, ends = _pointer_and_flags(interp)
    if ends:
        position = IDLE  # the step taken was the run's last: the snapshot is of the run that ended
    stacks: list[dict] = []
    state = {
        "id": interp.id,
        "position": position,
        "parked": interp._parked_tag,
        "ptr": ptr,
        "flags": flags,
        "stop": bool(interp._pending_stop),
        "ret": _stack_document(interp._ret_addr_stack, "the return stack"),
        "ctx": _contexts_document(interp, codec, blobs, stacks),
        "stacks": stacks,
        "exc_ignored": _class_names(interp._exc_ignored),
        "panic": None if interp._panic_exc is None else encode_exception(interp._panic_exc, codec, blobs),
        "pools": _pools_blob(interp, codec, blobs) if with_pools and codec is not None else None,
        "memo": _memos(outline),
        "attempts": _attempts(outline, interp),
        "children": None,
    }
    parked = interp._parked_tag is not None
    if position == NESTED:
        state["children"], parked = _children_document(interp, codec, blobs)
    return state, parked


def _outline(interp: Any) -> GraphOutline:
    """The outline of the node table `interp` runs (a slot swapped in place makes a newer one)."""
    prog = interp._prog
    while prog.successor is not None:
        prog = prog.successor
    return outline_of_program(prog)


def _memos(outline: GraphOutline) -> list[list]:
    return node_state.capture_memos(outline.program, outline.memo_rows) if outline.memo_rows else []


def _attempts(outline: GraphOutline, interp: Any) -> list[list]:
    rows = outline.attempt_rows
    return node_state.capture_attempts(outline.program, rows, interp) if rows else []


def _class_names(classes: Any) -> list[str]:
    return list(_class_names_and_text(classes)[0])


_class_names_text = _plain.class_names_text
"""The pass-through names' JSON text, kept (`_plain_snapshot.class_names_text`)."""
_class_names_and_text = _plain.class_names_and_text


def _pointer_and_flags(interp: Any) -> tuple[list[int], int, bool]:
    """The pointer and flags to store, and whether the run ends; at a `run_step_by()` yield, the
    pointer and flags the loop will have next (it ends when advancing runs off the graph)."""
    flags = interp._flag_bits
    if not interp._stepped:
        return _address(interp._pointer), flags, False
    if flags & _core.FLAG_JMP:
        return _address(interp._pointer), flags & ~_core.FLAG_JMP, False
    after = interp._pointer.copy()
    if interp.advance_pointer(after):
        return _address(after), flags, False
    return [], flags, True


def _address(ptr: Any) -> list[int]:
    """A pointer's address without materialising a bound pointer's list."""
    items = ptr._items
    if items is None:  # bound to a row: the table's own address
        return list(ptr._prog.addrs[ptr._row])
    addr = list(items)
    if len(addr) > MAX_ADDRESS or not all(type(i) is int for i in addr):
        raise SnapshotUnavailable(f"the pointer {addr[:8]}... is not an address of at most {MAX_ADDRESS} ints")
    return addr


def _entry_address(entry: Any, what: str) -> list[int]:
    if isinstance(entry, _core.PointerVector):
        return _address(entry)
    base = getattr(entry, "base_addr", None)
    if isinstance(base, list) and all(type(i) is int for i in base):
        return list(base)
    raise SnapshotUnavailable(f"{what} holds a {type(entry).__name__}, not an address")


def _stack_document(stack: Any, what: str) -> dict:
    return {"limit": int(stack.ovf), "items": [_entry_address(entry, what) for entry in stack.stack]}


def _contexts_document(interp: Any, codec: Any, blobs: list[bytes], stacks: list[dict]) -> dict:
    seen: dict[int, int] = {}
    items = [_context_document(interp, ctx, codec, blobs, stacks, seen) for ctx in interp._context_stack.stack]
    return {"limit": int(interp._context_stack.ovf), "items": items}


def _context_document(interp: Any, ctx: Any, codec: Any, blobs: list[bytes], stacks: list[dict], seen: dict) -> dict:
    ignored = tuple(ctx.exception_ignored)
    return {
        "ptr": _entry_address(ctx.ptr, "a context's pointer"),
        "flags": int(ctx.flags),
        "exc_ignored": None if ignored == tuple(interp._exc_ignored) else [type_name(cls) for cls in ignored],
        "stack": _context_stack_ref(interp, ctx.stack, stacks, seen),
        "panic": None if ctx.exception is None else encode_exception(ctx.exception, codec, blobs),
        "pools": _context_pools(interp, ctx, codec, blobs),
        "extra": _user_blob(ctx.extra, codec, blobs, "a context's extra data") if ctx.extra else None,
    }


def _context_stack_ref(interp: Any, stack: Any, stacks: list[dict], seen: dict) -> int | None:
    """Where a context's return stack is: None, -1 (the live one, shared) or its index in STATE's "stacks"."""
    if stack is None:
        return None
    if stack is interp._ret_addr_stack:
        return -1
    if id(stack) not in seen:
        seen[id(stack)] = len(stacks)
        stacks.append(_stack_document(stack, "a context's return stack"))
    return seen[id(stack)]


def _context_pools(interp: Any, ctx: Any, codec: Any, blobs: list[bytes]) -> Any:
    if ctx.s_args is None and ctx.s_kwargs is None:
        return None
    if ctx.s_args is interp._ava_args_v and ctx.s_kwargs is interp._ava_kwargs_v:
        return "live"
    args = tuple(a for a in (ctx.s_args or ()) if a is not interp)
    return _user_blob((args, ctx.s_kwargs), codec, blobs, "a context's injection pools")


def _pools_blob(interp: Any, codec: Any, blobs: list[bytes]) -> int:
    args = tuple(interp._ava_args_v[1:])
    return _user_blob((args, dict(interp._ava_kwargs_v)), codec, blobs, "the injection pools")


_user_blob = _plain.user_blob


def _children_document(interp: Any, codec: Any, blobs: list[bytes]) -> tuple[dict, bool]:
    found = node_state.step_children(_node_at_pointer(interp), interp)
    assert found is not None, "only called at a NESTED position"
    kind, children = found
    items, parked = [], False
    for child in children:
        if child._panic_exc is not None:
            raise SnapshotUnavailable(f"a {kind} sub-interpreter failed: the step is ending with its error")
        standing = node_state.child_standing(child)
        state, child_parked = _capture(child, _outline(child), codec, blobs, with_pools=False)
        parked = parked or child_parked
        items.append({"standing": standing, "graph": graph_fingerprint(child.get_graph()), "state": state})
    return {"kind": kind, "at": _address(interp._pointer), "items": items}, parked
