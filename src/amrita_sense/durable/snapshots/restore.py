"""Restoring a snapshot: a new interpreter that continues where the snapshotted one stood.

Everything is checked and decoded first (the framing, every field of the engine
document, the graph, the user blobs through the codec, the exception classes,
the node state the snapshot needs); only then is the interpreter given its
state and are the graph's nodes touched. A failing restore therefore leaves
nothing half-restored behind: it raises and the graph is as it was.

With `migrate=True` a snapshot taken on another version of the graph is moved
onto this one first (`amrita_sense.durable.snapshots.migrate`): its state document is
rewritten with the new graph's addresses, then restored as any other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from amrita_sense import core as _core
from amrita_sense.durable.errors import CodecError, CorruptSnapshot, GraphMismatch, RestoreError
from amrita_sense.durable.snapshots import format as fmt
from amrita_sense.durable.snapshots import migrate as _migrate
from amrita_sense.durable.snapshots import node_state, signing
from amrita_sense.durable.snapshots.capture import MAX_ADDRESS
from amrita_sense.durable.snapshots.fingerprint import (
    differing_rows,
    graph_fingerprint,
    mismatch,
    outline_of,
    unpack_digests,
)
from amrita_sense.durable.snapshots.migrate import MigrationPlan
from amrita_sense.durable.snapshots.panic import (
    check_exception_record,
    exception_classes,
    graph_modules,
    revive_exception,
)
from amrita_sense.node.abc_base import is_rendered_compose
from amrita_sense.node.core import program_of
from amrita_sense.runtime import observe as _observe
from amrita_sense.runtime.types import Flags, InterpreterContext

MAX_NESTING = 32
MAX_STACK_LIMIT = 1 << 20
"""The largest stack limit a snapshot may set (a limit is the stack's overflow guard)."""
"""How deep sub-interpreters (FUN_BLOCK inside FUN_BLOCK...) may nest in a snapshot."""
_POSITIONS = ("idle", "between", "gate", "step", "nested")
_STANDINGS = (node_state.RUNNING, node_state.RETURNED, node_state.PENDING)

PoolsMigration = Callable[[tuple[tuple, dict]], tuple[tuple, dict]]
"""Turns injection pools `(args, kwargs)` decoded from a snapshot into the pools to install."""


def restore_interpreter(
    cls: type,
    graph: Any,
    data: Any,
    *,
    extra_args: Any,
    extra_kwargs: Any,
    codec: Any,
    object_io: Any,
    exception_ignored: Any,
    middleware: Any,
    accept_passed_edits: bool,
    migrate: bool = False,
    context_migrations: Mapping[str, Callable[[tuple, dict], tuple[tuple, dict]]] | None = None,
    keyring: Any = None,
    allow_unsigned: bool = False,
    unset: Any,
) -> Any:
    """`WorkflowInterpreter.restore` (see there); `unset` is the "not given" sentinel."""
    _check_migration_arguments(migrate, context_migrations)
    data = signing.trusted(data, keyring, codec, allow_unsigned)  # before anything is decoded
    decoded = fmt.decode(data)
    blobs = decoded.blobs
    root = check_state(decoded.document.get("interp"), "interp", len(blobs))
    anchors = _migrate.read_anchors(decoded)
    pools_migration = _pools_migration(context_migrations, decoded.header.fingerprint)
    args, kwargs = _initial_pools(root, extra_args, extra_kwargs, codec, blobs, unset, pools_migration)
    interp = cls(
        graph,
        object_io,
        exception_ignored=() if exception_ignored is unset else exception_ignored,
        extra_args=args,
        extra_kwargs=kwargs,
        middleware=middleware,
    )
    if migrate:
        root, moved = _moved_state(interp, decoded, root, anchors, accept_passed_edits)
    else:
        _check_graph(interp, decoded, root, accept_passed_edits)
        moved = False
    ignored = _resolve_ignored(root, given=exception_ignored is not unset, modules=graph_modules(interp._prog))
    lenient = accept_passed_edits and not moved  # moved addresses are exact: what they name must be there
    plan = _plan_state(interp._prog, root, ignored, codec, blobs, lenient, pools_migration)
    plan.apply(interp, keep_id=True)
    durable = _check_durable(decoded.document.get("durable"))
    if durable is not None:
        interp._durable_steps = durable["steps"]
        wait = durable["wait"]
        interp._durable_wait = None if wait is None else (wait[0], wait[1])
    trace = _check_trace(decoded.document.get("trace"))
    observer = _observe.current
    if trace and observer is not None:
        observer.carry_trace(interp, trace)
    return interp


# ----- checking the document ------------------------------------------------------------------


def _fail(where: str, what: str) -> CorruptSnapshot:
    return CorruptSnapshot(f"{where}: {what}")


def _get(obj: dict, key: str, where: str) -> Any:
    if key not in obj:
        raise _fail(where, f"the field {key!r} is missing")
    return obj[key]


def _int(value: Any, where: str, low: int = 0, high: int = 2**62) -> int:
    if type(value) is not int or not low <= value <= high:
        raise _fail(where, f"expected an integer in [{low}, {high}], got {value!r:.40}")
    return value


def _address(value: Any, where: str) -> list[int]:
    if type(value) is not list or len(value) > MAX_ADDRESS or not all(type(i) is int for i in value):
        raise _fail(where, "expected an address (a list of at most 4096 integers)")
    return value


def _blob_index(value: Any, where: str, blob_count: int) -> int | None:
    if value is None:
        return None
    return _int(value, where, 0, blob_count - 1) if blob_count else _int(value, where, 0, -1)


def _stack_items(value: Any, where: str) -> list:
    """The items of a `{"limit": int, "items": [...]}` object (a STACK, or the context stack)."""
    if type(value) is not dict:
        raise _fail(where, "expected a stack object")
    _int(_get(value, "limit", where), where + ".limit", 0, MAX_STACK_LIMIT)
    items = _get(value, "items", where)
    if type(items) is not list:
        raise _fail(where, "the stack's items are not a list")
    return items


def _check_stack(value: Any, where: str) -> None:
    for i, item in enumerate(_stack_items(value, where)):
        _address(item, f"{where}.items[{i}]")


def check_state(state: Any, where: str, blob_count: int, depth: int = 0) -> dict:
    """`state` if it is a well-formed STATE object (see `durable.snapshot`), else `CorruptSnapshot`."""
    if depth > MAX_NESTING:
        raise _fail(where, f"sub-interpreters nest deeper than {MAX_NESTING}")
    if type(state) is not dict:
        raise _fail(where, "expected an interpreter state object")
    ident = _get(state, "id", where)
    if ident is not None and (type(ident) is not str or len(ident) > 64):
        raise _fail(where + ".id", "expected a short string or null")
    if _get(state, "position", where) not in _POSITIONS:
        raise _fail(where + ".position", "unknown position")
    if not isinstance(_get(state, "parked", where), (str, type(None))):
        raise _fail(where + ".parked", "expected a tag or null")
    _address(_get(state, "ptr", where), where + ".ptr")
    _int(_get(state, "flags", where), where + ".flags", 0, 7)
    if type(_get(state, "stop", where)) is not bool:
        raise _fail(where + ".stop", "expected a boolean")
    _check_stack(_get(state, "ret", where), where + ".ret")
    stacks = _get(state, "stacks", where)
    if type(stacks) is not list:
        raise _fail(where + ".stacks", "expected a list")
    for i, stack in enumerate(stacks):
        _check_stack(stack, f"{where}.stacks[{i}]")
    _check_contexts(_get(state, "ctx", where), where + ".ctx", blob_count, len(stacks))
    _check_names(_get(state, "exc_ignored", where), where + ".exc_ignored")
    panic = _get(state, "panic", where)
    if panic is not None:
        check_exception_record(panic, where + ".panic", blob_count)
    _blob_index(_get(state, "pools", where), where + ".pools", blob_count)
    _check_memos(_get(state, "memo", where), where + ".memo")
    _check_attempts(state.get("attempts", []), where + ".attempts")
    children = _get(state, "children", where)
    if children is not None:
        _check_children(children, where + ".children", blob_count, depth)
    return state


def _check_names(names: Any, where: str) -> list[str]:
    if type(names) is not list or not all(type(n) is str for n in names):
        raise _fail(where, "expected a list of class names")
    return names


def _check_contexts(ctx: Any, where: str, blob_count: int, stack_count: int) -> None:
    for i, item in enumerate(_stack_items(ctx, where)):
        at = f"{where}.items[{i}]"
        if type(item) is not dict:
            raise _fail(at, "expected a context object")
        _address(_get(item, "ptr", at), at + ".ptr")
        _int(_get(item, "flags", at), at + ".flags", 0, 7)
        names = _get(item, "exc_ignored", at)
        if names is not None:
            _check_names(names, at + ".exc_ignored")
        stack = _get(item, "stack", at)
        if stack is not None:
            _int(stack, at + ".stack", -1, stack_count - 1)
        if _get(item, "panic", at) is not None:
            check_exception_record(item["panic"], at + ".panic", blob_count)
        if _get(item, "pools", at) != "live":
            _blob_index(item["pools"], at + ".pools", blob_count)
        _blob_index(_get(item, "extra", at), at + ".extra", blob_count)


def _check_memos(memos: Any, where: str) -> None:
    if type(memos) is not list:
        raise _fail(where, "expected a list")
    for i, memo in enumerate(memos):
        if type(memo) is not list or len(memo) != 2:
            raise _fail(f"{where}[{i}]", "expected [address, address]")
        _address(memo[0], f"{where}[{i}][0]")
        _address(memo[1], f"{where}[{i}][1]")


def _check_trace(trace: Any) -> dict[str, str] | None:
    """The optional trace carrier: an object of strings."""
    if trace is None:
        return None
    if type(trace) is not dict or not all(type(k) is str and type(v) is str for k, v in trace.items()):
        raise _fail("trace", "expected an object of strings")
    return trace


def _check_durable(durable: Any) -> dict | None:
    """The optional DURABLE object (step count, the wait the run is parked at)."""
    if durable is None:
        return None
    if type(durable) is not dict or type(durable.get("steps")) is not int or durable["steps"] < 0:
        raise _fail("durable", "expected an object with a count of steps")
    wait = durable.get("wait")
    if wait is not None:
        if type(wait) is not list or len(wait) != 2:
            raise _fail("durable.wait", "expected [topic, due_at]")
        topic, due_at = wait
        if topic is not None and type(topic) is not str:
            raise _fail("durable.wait", "the topic is a string or null")
        if due_at is not None and type(due_at) not in (int, float):
            raise _fail("durable.wait", "due_at is a number or null")
    return durable


def _check_attempts(attempts: Any, where: str) -> None:
    if type(attempts) is not list:
        raise _fail(where, "expected a list")
    for i, item in enumerate(attempts):
        if type(item) is not list or len(item) != 3:
            raise _fail(f"{where}[{i}]", "expected [address, failed attempts, deadline]")
        _address(item[0], f"{where}[{i}][0]")
        _int(item[1], f"{where}[{i}][1]", 1)
        if item[2] is not None and (type(item[2]) not in (int, float) or item[2] != item[2]):
            raise _fail(f"{where}[{i}][2]", "expected a number of seconds or null")


def _check_children(children: Any, where: str, blob_count: int, depth: int) -> None:
    if type(children) is not dict or _get(children, "kind", where) not in ("fun_block", "batch"):
        raise _fail(where, "expected a children object of kind fun_block or batch")
    _address(_get(children, "at", where), where + ".at")
    items = _get(children, "items", where)
    if type(items) is not list or not items:
        raise _fail(where + ".items", "expected a non-empty list")
    for i, item in enumerate(items):
        at = f"{where}.items[{i}]"
        if type(item) is not dict or _get(item, "standing", at) not in _STANDINGS:
            raise _fail(at, "expected a child with a known standing")
        fingerprint = _get(item, "graph", at)
        if type(fingerprint) is not str or len(fingerprint) != 32:
            raise _fail(at + ".graph", "expected a graph fingerprint")
        check_state(_get(item, "state", at), at + ".state", blob_count, depth + 1)


def plan_migration(graph: Any, data: Any) -> MigrationPlan:
    """Where the run of snapshot `data` would go on the rendered `graph`, restoring nothing.

    A dry run of `WorkflowInterpreter.restore(graph, data, migrate=True)` for a deploy
    pipeline: it raises the `GraphMismatch` that restore would (a node the run needs is
    gone or ambiguous, see `amrita_sense.durable.snapshots.migrate`) and a `SnapshotFormatError`
    for bad data; it runs nothing the snapshot contains and decodes no user blob.
    """
    if not is_rendered_compose(graph):
        raise TypeError(f"plan_migration() needs a rendered graph (compose.render()), not {type(graph).__name__}")
    decoded = fmt.decode(data)
    root = check_state(decoded.document.get("interp"), "interp", len(decoded.blobs))
    anchors = _migrate.read_anchors(decoded)
    return _migrate.plan(outline_of(graph), decoded.header.fingerprint, root, anchors)[0]


# ----- the graph ------------------------------------------------------------------------------


def _moved_state(interp: Any, decoded: fmt.Decoded, root: dict, anchors: Any, accept_passed_edits: bool) -> tuple:
    """`(root state, moved)` for `restore(..., migrate=True)`: the state moved onto the interpreter's graph.

    A snapshot that predates migration support is checked as without `migrate` when
    `accept_passed_edits` is given too (and refused naming that it predates it otherwise).
    """
    if anchors is None and accept_passed_edits:
        _check_graph(interp, decoded, root, accept_passed_edits)
        return root, False
    migration, state = _migrate.plan(outline_of(interp.get_graph()), decoded.header.fingerprint, root, anchors)
    return state, not migration.identical


def _check_graph(interp: Any, decoded: fmt.Decoded, root: dict, accept_passed_edits: bool) -> None:
    """`GraphMismatch` unless the graph is the snapshot's (or, when accepted, differs only where the run passed)."""
    live = outline_of(interp.get_graph())
    expected = decoded.header.fingerprint
    if live.fingerprint == expected:
        return
    digests = unpack_digests(decoded.outline)
    rows = differing_rows(live, digests)
    if accept_passed_edits and rows is not None and rows[1] < _frontier(live.program, root):
        return
    raise mismatch(live, expected, digests, None if rows is None else rows[0])


def _frontier(prog: Any, state: dict) -> int:
    """The first row the run can still reach: its pointer, saved return addresses, context pointers."""
    addresses = [state["ptr"], *state["ret"]["items"], *(c["ptr"] for c in state["ctx"]["items"])]
    for stack in state["stacks"]:
        addresses.extend(stack["items"])
    rows = [prog.nrows]
    for addr in addresses:
        if addr:
            row, _ = prog.locate(addr)
            rows.append(row if row >= 0 else 0)
    return min(rows)


# ----- planning: everything decoded, nothing applied yet ---------------------------------------


@dataclass
class _StatePlan:
    """The decoded state of one interpreter, ready to apply."""

    ident: str | None
    pointer: Any
    flags: int
    stop: bool
    ret: Any
    contexts: Any
    panic: BaseException | None
    ignored: tuple | None
    memos: list = field(default_factory=list)
    attempts: list = field(default_factory=list)
    """`(node, failed attempts, deadline)` of the steps in flight at nodes with a policy."""
    children: tuple | None = None
    """`(kind, node, [(standing, plan), ...])` for a FUN_BLOCK / BATCH_RUN step in flight."""

    def apply(self, interp: Any, keep_id: bool) -> None:
        interp._pointer = self.pointer
        interp._flag_bits = self.flags
        interp._pending_stop = self.stop
        interp._ret_addr_stack = self.ret
        interp._context_stack = self.contexts(interp)
        interp._panic_exc = self.panic
        if self.ignored is not None:
            interp._exc_ignored = self.ignored
        if keep_id and self.ident is not None:
            interp._interpreter_id = self.ident
        for node, value in self.memos:
            node_state.apply_memo(node, value)
        for node, failures, deadline in self.attempts:
            node_state.apply_attempts(node, interp, failures, deadline)
        if self.children is not None:
            kind, node, items = self.children
            for child, (standing, plan) in zip(node_state.fork_children(node, kind, interp), items):
                plan.apply(child, keep_id=False)
                if standing == node_state.RETURNED:
                    child._pending_stop = True  # its run had returned: running it again returns at once


def _plan_state(
    prog: Any,
    state: dict,
    ignored: tuple | None,
    codec: Any,
    blobs: list[bytes],
    lenient: bool,
    pools_migration: PoolsMigration | None,
) -> _StatePlan:
    ret = _make_stack(prog, state["ret"])
    stacks = [_make_stack(prog, s) for s in state["stacks"]]
    contexts = _plan_contexts(prog, state["ctx"], ret, stacks, ignored, codec, blobs, pools_migration)
    modules = graph_modules(prog)
    panic = None if state["panic"] is None else revive_exception(state["panic"], codec, blobs, modules)
    plan = _StatePlan(
        state["id"],
        _make_pointer(prog, state["ptr"]),
        state["flags"],
        state["stop"],
        ret,
        contexts,
        panic,
        ignored,
    )
    plan.memos = _plan_memos(prog, state["memo"], lenient)
    plan.attempts = _plan_attempts(prog, state.get("attempts", []), lenient)
    if state["children"] is not None:
        plan.children = _plan_children(prog, state, codec, blobs, pools_migration)
    return plan


def _make_pointer(prog: Any, addr: list[int]) -> Any:
    """A pointer at `addr`: bound to its row when it names one (as the loop leaves pointers), else a list."""
    if addr:
        row, exact = prog.locate(addr)
        if row >= 0 and exact:
            return _core.PointerVector._at_row(prog, row)
    vec = _core.PointerVector(list(addr))
    if not addr:
        vec.clear()
    return vec


def _make_stack(prog: Any, doc: dict) -> Any:
    stack = _core.Stack(doc["limit"])
    stack.stack = [_make_pointer(prog, addr) for addr in doc["items"]]
    return stack


def _plan_contexts(
    prog: Any,
    doc: dict,
    ret: Any,
    stacks: list,
    ignored: tuple | None,
    codec: Any,
    blobs: list[bytes],
    pools_migration: PoolsMigration | None,
) -> Any:
    """A function of the restored interpreter that builds its context stack (live pools need it)."""
    entries = []
    modules = graph_modules(prog)
    for i, item in enumerate(doc["items"]):
        where = f"context {i}"
        own = None if item["exc_ignored"] is None else exception_classes(item["exc_ignored"], where, modules)
        stack = None if item["stack"] is None else (ret if item["stack"] == -1 else stacks[item["stack"]])
        panic = None if item["panic"] is None else revive_exception(item["panic"], codec, blobs, modules)
        pools = item["pools"]
        if pools not in (None, "live"):
            pools = _decode_pools(blobs, pools, codec, where, pools_migration)
        extra = {} if item["extra"] is None else _decode_blob(blobs, item["extra"], codec, where + " extra data")
        if not isinstance(extra, dict):
            raise RestoreError(f"{where}: the codec decoded its extra data to {type(extra).__name__}, not a dict")
        entries.append((item["ptr"], item["flags"], own, stack, panic, pools, extra))

    def build(interp: Any) -> Any:
        contexts = _core.Stack(doc["limit"])
        contexts.stack = [_make_context(prog, interp, ignored, *entry) for entry in entries]
        return contexts

    return build


def _make_context(prog, interp, ignored, ptr, flags, own, stack, panic, pools, extra) -> InterpreterContext:
    if pools == "live":
        s_args, s_kwargs = interp._ava_args_v, interp._ava_kwargs_v
    elif pools is None:
        s_args = s_kwargs = None
    else:
        s_args, s_kwargs = (interp, *pools[0]), pools[1]
    return InterpreterContext(
        ptr=_make_pointer(prog, ptr),
        exception_ignored=own if own is not None else (ignored if ignored is not None else interp._exc_ignored),
        s_args=s_args,
        s_kwargs=s_kwargs,
        extra=extra,
        stack=stack,
        exception=panic,
        flags=Flags(flags),
    )


def _plan_memos(prog: Any, memos: list, lenient: bool) -> list:
    planned: list[tuple[Any, list]] = []
    for node_addr, value in memos:
        row, exact = prog.locate(node_addr)
        problem: str | None
        if row < 0 or not exact:
            problem = "no node has this address"
        else:
            problem = node_state.memo_conflict(prog.nodes[row], value)
        if problem is None:
            planned.append((prog.nodes[row], value))
        elif not lenient:
            raise RestoreError(f"the return address kept by the node at {node_addr} cannot be restored: {problem}")
    return planned


def _plan_attempts(prog: Any, attempts: list, lenient: bool) -> list:
    planned: list[tuple[Any, int, float | None]] = []
    for node_addr, failures, deadline in attempts:
        row, exact = prog.locate(node_addr)
        problem = "no node has this address" if row < 0 or not exact else node_state.attempts_conflict(prog.nodes[row])
        if problem is None:
            planned.append((prog.nodes[row], failures, None if deadline is None else float(deadline)))
        elif not lenient:
            raise RestoreError(f"the attempts of the node at {node_addr} cannot be restored: {problem}")
    return planned


def _plan_children(
    prog: Any, state: dict, codec: Any, blobs: list[bytes], pools_migration: PoolsMigration | None
) -> tuple:
    """The step's node and a plan per sub-interpreter (forked at apply time, keeping their own pass-through classes)."""
    doc = state["children"]
    row, exact = prog.locate(doc["at"])
    if row < 0 or not exact or doc["at"] != state["ptr"]:
        raise CorruptSnapshot(f"the sub-interpreters' step {doc['at']} is not the node at the pointer")
    node = prog.nodes[row]
    problem = node_state.check_children_free(node, doc["kind"], len(doc["items"]))
    if problem is not None:
        raise RestoreError(f"the step at {doc['at']} cannot take its sub-interpreters back: {problem}")
    items = []
    for graph, item in zip(node_state.child_graphs(node, doc["kind"]), doc["items"]):
        actual = graph_fingerprint(graph)
        if actual != item["graph"]:
            raise GraphMismatch(
                f"the sub-graph run by the step at {doc['at']} differs from the snapshot's",
                row=row,
                address=list(doc["at"]),
                expected=item["graph"],
                actual=actual,
            )
        plan = _plan_state(program_of(graph), item["state"], None, codec, blobs, False, pools_migration)
        items.append((item["standing"], plan))
    return doc["kind"], node, items


# ----- pools and user blobs --------------------------------------------------------------------


def _initial_pools(
    root: dict,
    extra_args: Any,
    extra_kwargs: Any,
    codec: Any,
    blobs: list[bytes],
    unset: Any,
    pools_migration: PoolsMigration | None,
):
    """The pools to build the interpreter with: the caller's, else the snapshot's (with a codec), else empty."""
    stored = None
    if root["pools"] is not None and codec is not None and (extra_args is unset or extra_kwargs is unset):
        stored = _decode_pools(blobs, root["pools"], codec, "the injection pools", pools_migration)
    args = extra_args if extra_args is not unset else (stored[0] if stored else ())
    kwargs = extra_kwargs if extra_kwargs is not unset else (stored[1] if stored else None)
    return tuple(args), kwargs


def _decode_pools(
    blobs: list[bytes], index: int, codec: Any, what: str, pools_migration: PoolsMigration | None
) -> tuple[tuple, dict]:
    value = _decode_blob(blobs, index, codec, what)
    if not _is_pools(value):
        raise RestoreError(f"the codec decoded {what} to {type(value).__name__}, not (args, kwargs)")
    return value if pools_migration is None else pools_migration(value)


def _is_pools(value: Any) -> bool:
    pair = isinstance(value, tuple) and len(value) == 2
    return pair and isinstance(value[0], tuple) and isinstance(value[1], dict)


# ----- context migrations ------------------------------------------------------------------------


def _check_migration_arguments(migrate: Any, context_migrations: Any) -> None:
    """`TypeError` unless `migrate` is a bool and `context_migrations` None or a mapping of fingerprints to callables."""
    if type(migrate) is not bool:
        raise TypeError(f"migrate must be True or False, not {type(migrate).__name__}")
    if context_migrations is None:
        return
    if not isinstance(context_migrations, Mapping):
        raise TypeError(
            f"context_migrations must map graph fingerprints to callables, not {type(context_migrations).__name__}"
        )
    for fingerprint, migration in context_migrations.items():
        if not isinstance(fingerprint, str):
            raise TypeError(f"a context_migrations key is a graph fingerprint (str), not {type(fingerprint).__name__}")
        if not callable(migration):
            raise TypeError(f"context_migrations[{fingerprint!r}] must be callable, not {type(migration).__name__}")


def _pools_migration(context_migrations: Mapping | None, fingerprint: str) -> PoolsMigration | None:
    """The caller's migration of pools stored on the graph `fingerprint`, checked, or None when there is none."""
    migration = None if context_migrations is None else context_migrations.get(fingerprint)
    if migration is None:
        return None

    def migrate_pools(pools: tuple[tuple, dict]) -> tuple[tuple, dict]:
        try:
            result = migration(*pools)
        except Exception as exc:  # noqa: BLE001
            raise RestoreError(f"the context migration for graph {fingerprint} raised {exc!r}") from exc
        if not _is_pools(result):
            raise RestoreError(
                f"the context migration for graph {fingerprint} returned {type(result).__name__}, "
                "not (args: tuple, kwargs: dict)"
            )
        return result

    return migrate_pools


def _decode_blob(blobs: list[bytes], index: int, codec: Any, what: str) -> Any:
    if codec is None:
        raise RestoreError(f"{what} were stored with a codec: pass the same codec to restore them")
    try:
        return codec.loads(blobs[index])
    except Exception as exc:  # noqa: BLE001
        raise CodecError(f"the codec could not decode {what}: {exc!r}") from exc


def _resolve_ignored(root: dict, given: bool, modules: frozenset[str]) -> tuple | None:
    """The snapshot's pass-through exception classes, unless the caller gave its own (None: keep the interpreter's)."""
    if given:
        return None
    what = "the pass-through exception classes (pass exception_ignored=...)"
    return exception_classes(root["exc_ignored"], what, modules)
