"""`Depends` providers start in amrita-sense 1.1.3's order, on every path a node or handler is called
through.

The reference differential runs random programs (`provider_order.random_program`: sync, async,
I/O-waiting, generator and context-manager providers, nested two or three deep, both declaration
forms, keyword-only parameters, `use_cache`) through every path (`provider_order.PATHS`) here and
on 1.1.3 in a subprocess (AMRITA_SENSE_REF_PYTHON, or the checkout's `.venv-ref`; skipped without
one) and compares what the providers logged, in order. The other tests state the rule on small
cases and need no reference.

Not compared: providers that suspend for a single loop pass (`await asyncio.sleep(0)`): 1.1.3
spreads the starts of one resolution over several loop passes, so where such a provider ends
among the starts of providers that do not depend on it follows those passes (README,
compatibility).
"""

import asyncio
import json
import random
import subprocess
from typing import Annotated

import pytest

from amrita_sense import Node, NodeCompose, WorkflowInterpreter
from amrita_sense.hook.matcher import Depends
from support import provider_order
from support.dual import install_flags
from support.sampling import sized
from test_reference_113 import _ENV, reference_python

SEEDS = range(sized(1800))


def reference_programs() -> dict[str, dict]:
    programs = {}
    for seed in SEEDS:
        path = provider_order.PATHS[seed % len(provider_order.PATHS)]
        programs[f"seed {seed}"] = provider_order.random_program(random.Random(seed), path)
    return programs


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """`(programs, records)`: the programs and what 1.1.3 recorded for each."""
    python = reference_python()
    folder = tmp_path_factory.mktemp("provider_order")
    programs = reference_programs()
    (folder / "programs.json").write_text(json.dumps(programs))
    done = subprocess.run(
        [python, "-I", provider_order.__file__, "programs.json", "records.json"],
        cwd=folder,
        env=_ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return programs, json.loads((folder / "records.json").read_text())


@pytest.mark.asyncio
async def test_providers_start_and_end_in_113s_order_on_every_path(reference):
    programs, expected = reference
    ours = json.loads(json.dumps(await provider_order.record_all(provider_order.Api(), programs)))
    differing = [key for key in programs if ours[key] != expected[key]]
    assert differing == [], f"{len(differing)} programs differ, e.g. {differing[0]}: {programs[differing[0]]}"


def test_the_programs_cover_every_kind_path_and_form():
    """The differential is only as good as its programs: every provider kind, path, declaration
    form, keyword-only and `use_cache` parameters, failing providers and two-deep nesting occur."""
    programs = reference_programs().values()
    providers = [p for program in programs for p in program["providers"]]
    params = [q for program in programs for spec in program["nodes"] + program["providers"] for q in spec["params"]]
    depends = [q for q in params if "dep" in q]
    assert {program["path"] for program in programs} == set(provider_order.PATHS)
    assert {p["kind"] for p in providers} == set(provider_order.PROVIDER_KINDS) - {"sleep"}
    assert {p["outcome"] for p in providers} == {"value", "none", "raise"}
    assert {q["form"] for q in depends} == {"annotated", "annotated_default", "default"}
    assert {q["keyword_only"] for q in depends} == {True, False}
    assert {q["use_cache"] for q in depends} == {True, False}
    assert any(_depth(program) >= 3 for program in programs)


def _depth(program: dict) -> int:
    providers = program["providers"]

    def below(index: int) -> int:
        return 1 + max((below(q["dep"]) for q in providers[index]["params"] if "dep" in q), default=0)

    return max(below(q["dep"]) for spec in program["nodes"] for q in spec["params"] if "dep" in q)


# ----- the rule on small cases ---------------------------------------------------------------


class Log(list):
    def provider(self, name: str, *, coro: bool = False, after: asyncio.Event | None = None, sets=None):
        """A provider logging `name` when it starts; an async one (`coro`) may wait for `after`
        first and set `sets` when it starts."""
        if not coro:

            def sync_provider(pc: WorkflowInterpreter) -> str:
                self.append(name)
                return name

            return sync_provider

        async def async_provider(pc: WorkflowInterpreter) -> str:
            self.append(name)
            if sets is not None:
                sets.set()
            if after is not None:
                await after.wait()
                self.append(f"{name} done")
            return name

        return async_provider


async def run_nodes(*nodes, **kwargs) -> WorkflowInterpreter:
    interp = WorkflowInterpreter(NodeCompose(*nodes).render(), **kwargs)
    await interp.run()
    return interp


@pytest.mark.asyncio
async def test_a_nested_provider_starts_after_every_provider_of_the_level_above():
    """1.1.3 gives each provider of a level a task, so the leaves of the level (sync or async)
    start before the `Depends` of their siblings, whatever the declaration order and form."""
    log = Log()
    a1 = log.provider("a1")

    def a(x: Annotated[str, Depends(a1)]) -> str:
        log.append("a")
        return "a"

    @Node()
    def node(
        b: Annotated[str, Depends(log.provider("b", coro=True))],
        first: str = Depends(a),
        c: str = Depends(log.provider("c")),
    ) -> None:
        log.append(("node", b, first, c))

    await run_nodes(node, node)
    assert log == ["b", "c", "a1", "a", ("node", "b", "a", "c")] * 2


@pytest.mark.asyncio
async def test_nested_providers_of_siblings_interleave_level_by_level():
    log = Log()

    def parent(name: str, child: str):
        def provider(x: str = Depends(log.provider(child))) -> str:
            log.append(name)
            return name

        return provider

    @Node()
    def node(a: str = Depends(parent("a", "a1")), b: str = Depends(parent("b", "b1"))) -> None:
        log.append("node")

    await run_nodes(node)
    assert log == ["a1", "b1", "a", "b", "node"]


@pytest.mark.asyncio
async def test_a_generator_provider_resolves_its_depends_after_the_generator_before_it_entered():
    """Generator providers come after the plain ones, one at a time, each after its own `Depends`."""
    log = Log()

    def g1(d: str = Depends(log.provider("g1 dep"))):
        log.append("g1")
        yield "g1"
        log.append("g1 closed")

    def g2(d: Annotated[str, Depends(log.provider("g2 dep"))]):
        log.append("g2")
        yield "g2"
        log.append("g2 closed")

    @Node()
    def node(
        first: str = Depends(g1),
        plain: str = Depends(log.provider("plain")),
        second: str = Depends(g2),
    ) -> None:
        log.append("node")

    await run_nodes(node)
    assert log == ["plain", "g1 dep", "g1", "g2 dep", "g2", "node", "g2 closed", "g1 closed"]


@pytest.mark.asyncio
async def test_providers_still_run_concurrently():
    """A provider waiting for something a provider after it does does not hold that one back."""
    log = Log()
    ready = asyncio.Event()

    @Node()
    def node(
        first: str = Depends(log.provider("waits", coro=True, after=ready)),
        second: str = Depends(log.provider("sets", coro=True, sets=ready)),
    ) -> None:
        log.append("node")

    await asyncio.wait_for(run_nodes(node), 5)
    assert log == ["waits", "sets", "waits done", "node"]


@pytest.mark.asyncio
async def test_a_provider_waiting_does_not_hold_back_the_providers_that_do_not_need_it():
    log = Log()
    ready = asyncio.Event()

    def needs_the_waiting_one(x: str = Depends(log.provider("waits", coro=True, after=ready))) -> str:
        log.append("after waits")
        return "a"

    def two_deep(x: str = Depends(log.provider("deep"))) -> str:
        log.append("middle")
        return "m"

    async def sets_at_the_end(x: str = Depends(two_deep)) -> str:
        log.append("sets")
        ready.set()
        return "s"

    @Node()
    async def node(a: str = Depends(needs_the_waiting_one), b: str = Depends(sets_at_the_end)) -> None:
        log.append("node")

    await asyncio.wait_for(run_nodes(node), 5)
    assert log == ["waits", "deep", "middle", "sets", "waits done", "after waits", "node"]


@pytest.mark.asyncio
async def test_cancelling_a_node_cancels_its_waiting_providers():
    cancelled = []
    started = asyncio.Event()

    async def waits_forever() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("waits_forever")
            raise
        return "never"

    async def also_waits(x: str = Depends(waits_forever)) -> str:
        return "never"

    @Node()
    def node(a: str = Depends(waits_forever), b: str = Depends(also_waits)) -> None:
        pass

    run = asyncio.ensure_future(run_nodes(node))
    await started.wait()
    await asyncio.sleep(0)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await asyncio.sleep(0)
    assert cancelled == ["waits_forever", "waits_forever"]


@pytest.mark.asyncio
async def test_the_preload_interleaves_the_nested_providers_of_a_batch(monkeypatch):
    """1.1.3's preload resolves a batch of nodes concurrently, one task each."""
    from amrita_sense._unsafe import _Flags

    install_flags(monkeypatch, _Flags(WORKFLOW_DI_PRELOAD_CACHE=True))
    log = Log()

    def parent(name: str):
        def provider(x: str = Depends(log.provider(f"{name}1"))) -> str:
            log.append(name)
            return name

        return provider

    @Node()
    def n0(a: str = Depends(parent("a"), use_cache=True)) -> None:
        log.append("n0")

    @Node()
    def n1(b: str = Depends(parent("b"), use_cache=True)) -> None:
        log.append("n1")

    await run_nodes(n0, n1)
    assert log == ["a1", "b1", "a", "b", "n0", "n1"]
