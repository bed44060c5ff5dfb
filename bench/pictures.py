"""Picture benchmarks: exporting a large graph to Mermaid and DOT text.

    python -m bench.pictures            # a 10,000-node graph (target: under 1 s per export)
    python -m bench.pictures --quick    # a small graph, a smoke run

Rows: `walk` (the graph read into a `GraphPicture`), `mermaid` and `dot` (each a whole export
from the rendered graph: walk and print). The graph mixes plain steps with every clause kind
(IF/ELSE, WHILE, NATIVE_WHILE, Try, ALIAS + JMP, segments). Every number is the best of several
runs (this is a shared machine).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from amrita_sense import IF, JMP, WHILE, NodeCompose, Try
from amrita_sense.instructions import ALIAS, NATIVE_WHILE
from amrita_sense.node.core import program_of
from amrita_sense.node.wrapper import Node
from amrita_sense.pictures import picture_of, to_dot, to_mermaid

FULL_NODES = 10_000
QUICK_NODES = 300
TARGET_SECONDS = 1.0


def _step(index: int) -> Any:
    def work() -> None:
        return None

    work.__name__ = f"step_{index}"
    return Node(tag=f"step {index}")(work)


def _block(index: int) -> list[Any]:
    """One repeating block of clauses and steps (fresh nodes: a JMP or Try compiles once)."""
    s = [_step(index * 10 + k) for k in range(10)]
    name = f"target_{index}"
    return [
        s[0],
        IF(s[1], s[2]).ELSE(s[3]),
        WHILE(s[4]).ACTION(s[5]),
        NATIVE_WHILE(s[6]).ACTION(NodeCompose(s[7], s[8])),
        Try(s[9]).CATCH(ValueError, s[0]).FINALLY(s[1]),
        NodeCompose(s[2], s[3]),
        JMP(name),
        ALIAS(s[4], name),
    ]


def big_graph(nodes: int) -> Any:
    """A rendered graph of at least `nodes` rows, made of repeated blocks."""
    per_block = len(program_of(NodeCompose(*_block(0)).render()).nodes)
    blocks = -(-nodes // per_block)
    return NodeCompose(*(item for index in range(blocks) for item in _block(index))).render()


def best(run: Callable[[], Any], repeat: int) -> float:
    """The best wall time of `repeat` runs of `run`, in seconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def rows(quick: bool) -> dict[str, Any]:
    """The measured rows: the graph's size and the seconds of each export."""
    graph = big_graph(QUICK_NODES if quick else FULL_NODES)
    size = len(program_of(graph).nodes)
    repeat = 3 if quick else 5
    mermaid, dot = to_mermaid(graph), to_dot(graph)
    assert mermaid == to_mermaid(graph) and dot == to_dot(graph)  # deterministic, and it works
    return {
        "rows": size,
        "walk": best(lambda: picture_of(graph), repeat),
        "mermaid": best(lambda: to_mermaid(graph), repeat),
        "dot": best(lambda: to_dot(graph), repeat),
        "mermaid_bytes": len(mermaid),
        "dot_bytes": len(dot),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pictures", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small graph, a smoke run")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    found = rows(args.quick)
    if args.json:
        print(json.dumps(found))
        return 0
    print(f"graph of {found['rows']} rows")
    for name in ("walk", "mermaid", "dot"):
        verdict = "" if args.quick else ("  ok" if found[name] < TARGET_SECONDS else f"  over {TARGET_SECONDS} s")
        print(f"  {name:<8} {found[name] * 1000:9.1f} ms{verdict}")
    print(f"  text: mermaid {found['mermaid_bytes']} bytes, dot {found['dot_bytes']} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
