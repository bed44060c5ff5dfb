"""Programs of nodes and event handlers whose `Depends` providers record when they start and end.

A program is plain, JSON-able data: providers (sync or async functions, ones that await once,
generators, async generators, `@contextmanager` / `@asynccontextmanager` functions; each may
return None or raise instead of giving its value), each with `Depends` parameters of its own on
providers further down the list (so nesting is two or three deep), and nodes whose parameters mix
the `Annotated[str, Depends(p)]` and `= Depends(p)` forms, positional-or-keyword and keyword-only,
with and without `use_cache`, and take pool values beside them. A program runs through one
*path* (`PATHS`): `run()`, `run_step_by()`, a middleware, `call_sub` (with and without extra
keywords), CATCH handlers, event handlers, the DI preload, the uncached mode, `Depends` objects
in the interpreter's extra args.

`record(api, program)` runs a program twice (the second run finds the plans and the `use_cache`
results of the first) and returns what every provider, node and teardown logged, in order, and
the type of the error that ended each run. This file imports only what amrita-sense 1.1.3 has
too: `python provider_order.py PROGRAMS.json RECORDS.json` writes 1.1.3's records (see
`test_provider_order.py`).
"""

import asyncio
import contextlib
import importlib
import json
import random
import sys
from collections.abc import Callable
from typing import Annotated, Any

PROVIDER_KINDS = ("sync", "async", "io", "returns_io", "gen", "agen", "cm", "acm")
"""sync / async functions, an async function that waits for "I/O" between its start and its end
(`io`: see `Builder._io`), a sync function returning a coroutine that does so (`returns_io`), a
generator, an async generator, and the two context-manager decorators over generators. (`sleep`, an async function awaiting `sleep(0)` once, can be asked
for, but 1.1.3's order then depends on its loop passes: see `test_provider_order.py`.)"""
IO_QUIET = 40
"""Loop passes between two I/O completions: more than any resolution here needs to take every
step that does not wait for I/O."""
GENERATOR_KINDS = ("gen", "agen", "cm", "acm")
PATHS = (
    "run",
    "steps",
    "middleware",
    "call_sub",
    "call_sub_kw",
    "catch",
    "branch",
    "event",
    "event_args",
    "preload",
    "no_cache",
    "extra_args",
)
"""`run()`, `run_step_by()`, `run()` under a pass-through middleware, `call_sub` from a node (with
an extra keyword), CATCH handlers, IF bodies, event handlers (with a `Depends` among
`trigger_event`'s arguments), the DI preload, `WORKFLOW_DI_NO_CACHE`, a `Depends` among the
interpreter's extra args."""
EVENT_PATHS = ("event", "event_args")
EVENT_TYPE = "provider_order_event"


class Api:
    """The names a program is built from, taken from one package (`sub("node")` is its
    `amrita_sense.node`)."""

    def __init__(self, sub: Callable[[str], Any] | None = None):
        sub = sub or (lambda dotted: importlib.import_module(f"amrita_sense.{dotted}"))
        self.ins = sub("instructions")
        node = sub("node")
        self.Node, self.NodeCompose = node.Node, node.NodeCompose
        self.WorkflowInterpreter = sub("runtime.workflow").WorkflowInterpreter
        matcher = sub("hook.matcher")
        self.Depends, self.Matcher, self.MatcherFactory = matcher.Depends, matcher.Matcher, matcher.MatcherFactory
        self.EventRegistry = matcher.EventRegistry
        self.BaseEvent = sub("hook.event").BaseEvent
        self.unsafe = sub("_unsafe")
        self.modules = [sub("_unsafe"), sub("runtime.workflow"), matcher]


# ----- random programs -----------------------------------------------------------------------


def random_program(rng: random.Random, path: str | None = None) -> dict:
    """A random program: 3-8 providers (provider i depends only on providers after it, at most
    three levels below a node), 1-4 nodes (or handlers) of 1-4 parameters each."""
    path = path or rng.choice(PATHS)
    count = rng.randint(3, 8)
    depth = [0] * count  # how many provider levels sit below provider i (0: it has no Depends)
    providers: list[dict] = [{}] * count
    for i in reversed(range(count)):
        below = [j for j in range(i + 1, count) if depth[j] < 2]
        params = []
        if below and rng.random() < 0.5:
            params = [_depends_param(rng, rng.choice(below), path, False) for _ in range(rng.randint(1, 3))]
        depth[i] = 1 + max((depth[p["dep"]] for p in params), default=-1)
        if rng.random() < 0.3:
            params.append(_pool_param(rng, path))
        kind = rng.choice(PROVIDER_KINDS)
        outcome = rng.choices(["value", "none", "raise"], [0.9, 0.05, 0.05])[0]
        if path == "preload":  # a failed preload stops the batch (README, compatibility: 1.1.3 goes on)
            outcome = "value"
        providers[i] = {"kind": kind, "params": params, "outcome": outcome}
    nodes = []
    for _ in range(rng.randint(1, 4)):
        params = [_depends_param(rng, rng.randrange(count), path, True) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.3:
            params.append(_pool_param(rng, path))
        nodes.append({"params": params, "coro": path in EVENT_PATHS or rng.random() < 0.5})
    return {"path": path, "providers": providers, "nodes": nodes}


def _depends_param(rng: random.Random, dep: int, path: str, top: bool) -> dict:
    """`scope="call"` only on a node's own parameters: elsewhere 1.1.3 has no call scope open
    (README, compatibility: we open one)."""
    if path in EVENT_PATHS:
        scopes = [None, "dispatch"]
    else:
        scopes = [None, None, "workflow", "call"] if top else [None, None, "workflow"]
    return {
        "form": rng.choice(["annotated", "annotated_default", "default"]),
        "keyword_only": rng.random() < 0.3,
        "dep": dep,
        "use_cache": rng.random() < 0.3,
        "scope": rng.choice(scopes),
    }


def _pool_param(rng: random.Random, path: str) -> dict:
    return {"pool": "tag" if path in EVENT_PATHS or rng.random() < 0.5 else "pc", "keyword_only": rng.random() < 0.3}


# ----- building --------------------------------------------------------------------------------


class Builder:
    """Makes a program's functions on one package; everything they log lands in `log`."""

    def __init__(self, api: Api, program: dict):
        self.api = api
        self.program = program
        self.log: list = []
        self.io_calls = 0
        self.io_waiting: list = []
        self.providers: list = [None] * len(program["providers"])
        for i in reversed(range(len(self.providers))):  # a provider's own providers come after it
            self.providers[i] = self._provider(i, program["providers"][i])

    def _namespace(self) -> dict:
        return {
            "Annotated": Annotated,
            "asyncio": asyncio,
            "contextmanager": contextlib.contextmanager,
            "asynccontextmanager": contextlib.asynccontextmanager,
            "WorkflowInterpreter": self.api.WorkflowInterpreter,
            "log": self.log,
            "io": self._io,
        }

    def _io(self) -> Any:
        """A future an "I/O reactor" task completes later: I/O that takes a while, deterministically.

        The reactor completes one waiting future every `IO_QUIET` loop passes, the one whose
        number (a fixed shuffle of the order they were asked for) is lowest, so the order they
        finish in depends on the order they started in, not on loop passes.
        """
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self.io_calls += 1
        self.io_waiting.append((self.io_calls * 7919 % 104729, done))
        if len(self.io_waiting) == 1:
            loop.create_task(self._io_reactor())
        return done

    async def _io_reactor(self) -> None:
        while self.io_waiting:
            for _ in range(IO_QUIET):
                await asyncio.sleep(0)
            self.io_waiting.sort(key=lambda item: item[0])
            _, done = self.io_waiting.pop(0)
            if not done.done():
                done.set_result(None)

    def _depends(self, param: dict) -> Any:
        spec = self.program["providers"][param["dep"]]
        scope = param["scope"] if spec["kind"] in GENERATOR_KINDS else None
        return self.api.Depends(self.providers[param["dep"]], use_cache=param["use_cache"], scope=scope)

    def _signature(self, params: list, namespace: dict) -> str:
        """The parameter list: positional-or-keyword ones first (those without a default before
        those with one, as Python requires), then the keyword-only ones; order kept otherwise."""
        positional, keyword = [], []
        for k, param in enumerate(params):
            name = f"a{k}"
            if "pool" in param:
                text = f"{param['pool']}: {'WorkflowInterpreter' if param['pool'] == 'pc' else 'str'}"
                required = True
            else:
                namespace[f"D{k}"] = self._depends(param)
                if param["form"] == "default":
                    text, required = f"{name}: str = D{k}", False
                elif param["form"] == "annotated_default":
                    text, required = f"{name}: Annotated[str, D{k}] = None", False
                else:
                    text, required = f"{name}: Annotated[str, D{k}]", True
            (keyword if param["keyword_only"] else positional).append((required, text))
        positional.sort(key=lambda item: not item[0])
        texts = [text for _, text in positional]
        if keyword:
            texts += ["*", *(text for _, text in keyword)]
        return ", ".join(texts)

    def _provider(self, index: int, spec: dict) -> Any:
        name = f"p{index}"
        namespace = self._namespace()
        signature = self._signature(spec["params"], namespace)
        kind = spec["kind"]
        value = {"value": repr(name), "none": "None", "raise": None}[spec["outcome"]]
        give = f"raise ValueError({name!r})" if value is None else None
        lines = [f"log.append(['start', {name!r}])"]
        if kind == "sleep":
            lines.append("await asyncio.sleep(0)")
        elif kind == "io":
            lines.append("await io()")
        if kind == "returns_io":
            lines += ["async def rest():", "    await io()", f"    log.append(['end', {name!r}])"]
            lines += [f"    {give or f'return {value}'}", "return rest()"]
        elif kind in GENERATOR_KINDS:
            lines += [give, "yield"] if give else [f"log.append(['enter', {name!r}])", f"yield {value}"]
            lines.append(f"log.append(['teardown', {name!r}])")
        else:
            lines.append(f"log.append(['end', {name!r}])")
            lines.append(give or f"return {value}")
        head = "async def" if kind in ("async", "sleep", "io", "agen", "acm") else "def"
        decorator = {"cm": "@contextmanager\n", "acm": "@asynccontextmanager\n"}.get(kind, "")
        source = f"{decorator}{head} {name}({signature}):\n" + "".join(f"    {line}\n" for line in lines)
        exec(compile(source, f"<provider {name}>", "exec", dont_inherit=True), namespace)
        return namespace[name]

    def node_function(self, index: int, spec: dict) -> Any:
        name = f"n{index}"
        namespace = self._namespace()
        signature = self._signature(spec["params"], namespace)
        shown = [f"a{k}" for k, param in enumerate(spec["params"]) if "pool" not in param]
        values = "[" + ", ".join(f"[{k!r}, {k}]" for k in shown) + "]"
        head = "async def" if spec["coro"] else "def"
        source = f"{head} {name}({signature}):\n    log.append(['node', {name!r}, {values}])\n"
        exec(compile(source, f"<node {name}>", "exec", dont_inherit=True), namespace)
        return namespace[name]

    def nodes(self) -> list:
        return [
            self.api.Node()(self.node_function(i, spec)) if spec["coro"] else self._sync_node(i, spec)
            for i, spec in enumerate(self.program["nodes"])
        ]

    def _sync_node(self, index: int, spec: dict) -> Any:
        # alternate between the worker-thread default and inline sync nodes
        return self.api.Node(wrap_to_async=bool(index % 2))(self.node_function(index, spec))


# ----- running -----------------------------------------------------------------------------------


async def _pass_through(pc: Any) -> Any:
    return await pc._call()


def _graph(api: Api, builder: Builder, path: str) -> Any:
    nodes = builder.nodes()  # may raise DependsDeclarationError: `record` catches it
    ins = api.ins
    if path in ("call_sub", "call_sub_kw"):
        aliases = [f"s{i}" for i in range(len(nodes))]
        extra = {"sub": "x"} if path == "call_sub_kw" else {}

        async def caller(pc: api.WorkflowInterpreter) -> None:  # type: ignore[name-defined]
            for alias in aliases:
                await pc.call_sub(list(pc.get_graph().alias2vector_map[alias]), **extra)

        archived = ins.ARCHIVED_NODES(*(ins.ALIAS(node, alias) for node, alias in zip(nodes, aliases)))
        return api.NodeCompose(api.Node()(caller), archived).render()
    if path == "branch":

        def yes(pc: api.WorkflowInterpreter) -> bool:  # type: ignore[name-defined]
            return True

        condition = api.Node(wrap_to_async=False)(yes)
        return api.NodeCompose(*(ins.IF(condition, node) for node in nodes)).render()
    if path == "catch":

        def fail(pc: api.WorkflowInterpreter) -> None:  # type: ignore[name-defined]
            raise KeyError("body")

        raiser = api.Node(wrap_to_async=False)(fail)
        return api.NodeCompose(*(ins.Try(raiser).CATCH(KeyError, node) for node in nodes)).render()
    return api.NodeCompose(*nodes).render()


def _error(exc: BaseException | None) -> str | None:
    return None if exc is None else type(exc).__name__


def _without_generators(specs: list) -> list[int]:
    """The providers with no generator provider among them and their own `Depends`, in order."""
    found: list[int] = []
    for i in reversed(range(len(specs))):  # a provider's own providers come after it
        deps = [q["dep"] for q in specs[i]["params"] if "dep" in q]
        if specs[i]["kind"] not in GENERATOR_KINDS and all(dep in found for dep in deps):
            found.append(i)
    return sorted(found)


async def _run_workflow(api: Api, builder: Builder, path: str) -> list:
    try:
        graph = _graph(api, builder, path)
    except Exception as exc:
        return [{"build": type(exc).__name__}]
    kwargs: dict = {"extra_kwargs": {"tag": "t"}}
    if path == "middleware":
        kwargs["middleware"] = _pass_through
    if path == "extra_args":  # the interpreter's own Depends, resolved when a run starts (no scope open there)
        plain = _without_generators(builder.program["providers"])
        kwargs["extra_args"] = (api.Depends(builder.providers[plain[-1]]),) if plain else ()
    interp = api.WorkflowInterpreter(graph, **kwargs)
    runs = []
    # 1.1.3's preload makes the `use_cache` results again at every run start (README,
    # compatibility: ours keeps them), so a preload program runs once
    for _ in range(1 if path == "preload" else 2):
        start = len(builder.log)
        error = None
        try:
            if path == "steps":
                async for _ in interp.run_step_by():
                    pass
            else:
                await interp.run()
        except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
            raise
        except BaseException as exc:  # recorded and compared
            error = exc
        runs.append({"log": builder.log[start:], "error": _error(error)})
        if error is not None:
            break
    return runs


async def _run_events(api: Api, builder: Builder, path: str) -> list:
    registry = api.EventRegistry()
    registry._event_handlers.clear()
    matcher = api.Matcher(EVENT_TYPE, block=False)
    for i, spec in enumerate(builder.program["nodes"]):
        matcher.handle()(builder.node_function(i, spec))

    class Event(api.BaseEvent):  # type: ignore[name-defined]
        def get_event_type(self) -> str:
            return EVENT_TYPE

        @property
        def event_type(self) -> str:
            return EVENT_TYPE

    runs = []
    try:
        for _ in range(2):
            start = len(builder.log)
            error = None
            try:
                if path == "event_args":  # resolved once per dispatch, before the handlers
                    await api.MatcherFactory.trigger_event(Event(), api.Depends(builder.providers[-1]), tag="t")
                else:
                    await api.MatcherFactory.trigger_event(Event(), tag="t")
            except (KeyboardInterrupt, SystemExit, asyncio.CancelledError):
                raise
            except BaseException as exc:
                error = exc
            runs.append({"log": builder.log[start:], "error": _error(error)})
    finally:
        registry._event_handlers.clear()
    return runs


@contextlib.contextmanager
def _flags(api: Api, path: str):
    """A fresh flags object with the path's switch on, in every module that holds the flags."""
    if path not in ("preload", "no_cache"):
        yield
        return
    fresh = api.unsafe._Flags()
    setattr(fresh, "WORKFLOW_DI_PRELOAD_CACHE" if path == "preload" else "WORKFLOW_DI_NO_CACHE", True)
    saved = [(module, module.__flags__) for module in api.modules if hasattr(module, "__flags__")]
    for module, _ in saved:
        module.__flags__ = fresh
    try:
        yield
    finally:
        for module, flags in saved:
            module.__flags__ = flags


async def record(api: Api, program: dict) -> list:
    """Per run: what the providers, nodes and teardowns logged, in order, and the error's type."""
    try:
        builder = Builder(api, program)
    except Exception as exc:
        return [{"build": type(exc).__name__}]
    path = program["path"]
    with _flags(api, path):
        if path in EVENT_PATHS:
            return await _run_events(api, builder, path)
        return await _run_workflow(api, builder, path)


async def record_all(api: Api, programs: dict[str, dict]) -> dict[str, list]:
    return {key: await record(api, program) for key, program in programs.items()}


def _main(programs_path: str, records_path: str) -> None:
    """Record every program of a JSON file on the `amrita_sense` this interpreter imports (1.1.3
    for the reference differential) and write the records as JSON."""
    import logging

    logging.disable(logging.CRITICAL)
    log = importlib.import_module("amrita_sense.logging").logger
    if hasattr(log, "remove"):  # 1.1.3's loguru logger writes every panic to stderr
        log.remove()
    with open(programs_path) as fh:
        programs = json.load(fh)
    records = asyncio.run(record_all(Api(), programs))
    with open(records_path, "w") as fh:
        json.dump(records, fh)


if __name__ == "__main__":
    _main(*sys.argv[1:3])
