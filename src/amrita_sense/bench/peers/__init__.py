"""The peers: other workflow runtimes measured on the same work as this one (`--peers`).

`PEERS` is the one place their versions are pinned. Each peer runs in its own virtual
environment (`venvs.py` creates it with pip, under `.venv-peers/<name>` by default) and in its
own benchmark worker, which loads that peer's module from this directory by path: the module
writes the peers' work (`scenarios.PEER_WORKS`) the way the peer's users write it, and imports
its library only inside `build`, so every module here imports without its peer installed.

This file is loaded by path in the peers' environments too: standard library only.
"""

import dataclasses
import os

HERE = os.path.dirname(os.path.abspath(__file__))

# Every peer's environment also gets uvloop (the runner measures both event loops).
UVLOOP = "uvloop==0.23.0; sys_platform != 'win32'"


@dataclasses.dataclass(frozen=True)
class Peer:
    """A runtime in the comparison."""

    name: str  # as `--peers` takes it; its environment's directory and its key in the JSON
    label: str  # as the table names it
    module: str  # the file in this directory with its version of the work
    requirements: tuple[str, ...]  # what pip installs into its environment, pinned
    reported: tuple[str, ...]  # the distributions whose versions the results print
    kinds: tuple[str, ...] = ("peer",)  # the work it runs: "peer" (the peers' work), "durable" (checkpointed)

    @property
    def path(self) -> str:
        return os.path.join(HERE, f"{self.module}.py")

    @property
    def install(self) -> tuple[str, ...]:
        return self.requirements + (UVLOOP,)


PEERS: dict[str, Peer] = {
    peer.name: peer
    for peer in (
        Peer(
            "langgraph",
            "LangGraph",
            "langgraph_peer",
            (
                "langgraph==1.2.24",
                "langgraph-checkpoint-sqlite==3.1.2",  # SqliteSaver (the durable work)
                "langgraph-checkpoint-postgres==3.2.0",  # PostgresSaver
                "psycopg[binary]==3.3.9",
            ),
            (
                "langgraph",
                "langchain-core",
                "langsmith",
                "langgraph-checkpoint-sqlite",
                "langgraph-checkpoint-postgres",
                "psycopg",
            ),
            ("peer", "durable"),
        ),
        Peer(
            "pydantic-graph",
            "pydantic-graph",
            "pydantic_graph_peer",
            ("pydantic-graph==2.68.0",),
            ("pydantic-graph", "pydantic", "logfire-api"),
        ),
        Peer(
            "burr",
            "Burr",
            "burr_peer",
            # psycopg2: what Burr's PostgreSQLPersister connects with
            ("apache-burr==0.42.0", "psycopg2-binary==2.9.13"),
            ("apache-burr", "psycopg2-binary"),
            ("peer", "durable"),
        ),
        Peer(
            "llamaindex",
            "LlamaIndex Workflows",
            "llamaindex_peer",
            ("llama-index-workflows==2.26.1",),
            ("llama-index-workflows", "llama-index-instrumentation", "pydantic"),
        ),
        Peer("dbos", "DBOS Transact", "dbos_peer", ("dbos==3.4.0",), ("dbos", "sqlalchemy", "psycopg"), ("durable",)),
        # pydantic-graph 2.x has no state persistence; 1.x, its last line with FileStatePersistence,
        # runs the durable work (the `pydantic-graph` peer above the rest)
        Peer(
            "pydantic-graph-1",
            "pydantic-graph 1.x",
            "pydantic_graph_file_peer",
            ("pydantic-graph==1.107.10",),
            ("pydantic-graph", "pydantic"),
            ("durable",),
        ),
    )
}


def select(text: str) -> tuple[Peer, ...]:
    """The peers a `--peers` value names: "all" or a comma list of names."""
    names = list(PEERS) if text.strip() in ("", "all") else [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise ValueError(f"unknown peer(s): {', '.join(unknown)}; choose from {', '.join(PEERS)} (or all)")
    return tuple(PEERS[n] for n in dict.fromkeys(names))
