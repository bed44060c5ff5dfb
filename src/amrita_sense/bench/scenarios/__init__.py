"""Benchmark scenarios shared by the comparison runner and the pytest-benchmark suite.

Only the public API of amrita-sense 1.1.3 is used here, so this very package runs under the
reference package and under amrita-sense-turbo (either build); the worker and `bench/conftest.py`
load it by path where `amrita_sense` has no `bench` package, so its modules import each other
relatively, never through `amrita_sense.bench`.

A scenario function takes a size and returns a `Plan`: everything slow to build
(nodes, rendered graphs) is built by the scenario function itself, `prepare`
runs untimed before every measurement (fresh interpreter, counters reset),
`timed` is the only part on the clock, and `check` proves afterwards that the
timed part did exactly the work it claims (raises `CountMismatch` otherwise),
so a scenario can never silently measure nothing. A scenario whose feature is
missing from the build under test raises `Unavailable` while it is being built.

Conventions: sync bodies are decorated `wrap_to_async=False` unless the scenario
is about the worker-thread hand-off; all nodes of a chain share one body function
(as a chain built in a loop does); the plain-Python floors (`floor_*`) call the
very same bodies without the engine.

Kinds: "engine" (the default set), "app" (a user's application: AmritaCore's chat turn,
in the default set), "floor", "peer" (`--peers`), "durable" (`--peers`: checkpointed), "variant" (a near
variant, run with `--families`: a `Family` groups scenarios that do the same work
written the ways users write it; some members are "engine" scenarios too).

Modules, each importing only those listed before it: `framework` (the registry, plans,
targets, measuring), `bodies` (the parts several families share), then one module per family,
imported here in the order the report lists them: `engine`, `serving` (per request), `variants`,
`policies`, `amrita_core`, `floors`, `peer_work`, `durable_work` (the peers' work with a checkpoint
after every node: kind "durable", each run in the durability modes a system has). Importing them registers their scenarios in `SCENARIOS`.
"""

# isort: off
# The families in the report's order: each registers its scenarios as it is imported.
from . import engine, serving, variants, policies, amrita_core, floors, peer_work, durable_work

# isort: on
from .amrita_core import AMRITA_CORE_ANSWER, AMRITA_CORE_TURNS
from .bodies import ALPHA, BETA, CONTEXTS, NODES_PER_INTERPRETER, REQUEST_NODES, Alpha, Beta
from .durable_work import (
    DURABLE_CHAIN_NODES,
    DURABLE_MODES,
    DURABLE_WORKS,
    DurableSystem,
    DurableWork,
    durable_chain_result,
    durable_plan,
    durable_systems,
    postgres_place,
)
from .framework import (
    FAMILIES,
    SCENARIOS,
    CountMismatch,
    Family,
    Plan,
    Scenario,
    Tally,
    Target,
    Unavailable,
    build,
    expect,
    expect_results,
    format_seconds,
    measure,
    measure_best,
    need,
    scenario,
)
from .peer_work import (
    PEER_AGENT_ITERATIONS,
    PEER_CHAIN_NODES,
    PEER_MODULUS,
    PEER_WORKS,
    AgentRequest,
    BranchRequest,
    ChainRequest,
    PeerTransient,
    PeerWork,
    peer_agent_result,
    peer_branch_result,
    peer_chain_result,
    peer_flaky_call,
    peer_mix,
    peer_plan,
    peer_retry_result,
)

__all__ = [
    "ALPHA",
    "AMRITA_CORE_ANSWER",
    "AMRITA_CORE_TURNS",
    "BETA",
    "CONTEXTS",
    "DURABLE_CHAIN_NODES",
    "DURABLE_MODES",
    "DURABLE_WORKS",
    "FAMILIES",
    "NODES_PER_INTERPRETER",
    "PEER_AGENT_ITERATIONS",
    "PEER_CHAIN_NODES",
    "PEER_MODULUS",
    "PEER_WORKS",
    "REQUEST_NODES",
    "SCENARIOS",
    "AgentRequest",
    "Alpha",
    "Beta",
    "BranchRequest",
    "ChainRequest",
    "CountMismatch",
    "DurableSystem",
    "DurableWork",
    "Family",
    "PeerTransient",
    "PeerWork",
    "Plan",
    "Scenario",
    "Tally",
    "Target",
    "Unavailable",
    "amrita_core",
    "build",
    "durable_chain_result",
    "durable_plan",
    "durable_systems",
    "durable_work",
    "engine",
    "expect",
    "expect_results",
    "floors",
    "format_seconds",
    "measure",
    "measure_best",
    "need",
    "peer_agent_result",
    "peer_branch_result",
    "peer_chain_result",
    "peer_flaky_call",
    "peer_mix",
    "peer_plan",
    "peer_retry_result",
    "peer_work",
    "policies",
    "postgres_place",
    "scenario",
    "serving",
    "variants",
]
