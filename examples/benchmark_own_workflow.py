"""Benchmark your own workflow with the runner that ships in the wheel.

    python examples/benchmark_own_workflow.py         # a quick run of the command below
    python -m amrita_sense.bench --workflow examples/benchmark_own_workflow.py:make_request --quick
    amrita-sense-bench --workflow myapp.flows:make_request --against /path/to/venv-with-1.1.3/bin/python

`make_request()` returns an async callable, one request per call (a factory may return a graph
instead: each run is then a new `WorkflowInterpreter` over it, as an application runs a request). The runner starts one worker process per build (the compiled core and
the pure build, when both are there), first checks that every build ran the same nodes in the
same order, then times the runs. `--quick` keeps it to a second or two; without it the runner takes
five measurements of about 0.2 s each. `--profile-nodes` shows where the time goes per node.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from amrita_sense import IF, WHILE, Node, NodeCompose, WorkflowInterpreter


@dataclass
class Ticket:
    text: str = "printer on floor 3 is out of toner again"
    words: list[str] = field(default_factory=list)
    priority: str = "normal"


@Node(wrap_to_async=False)
def tokenize(ticket: Ticket) -> None:
    ticket.words = ticket.text.split()


@Node(wrap_to_async=False)
def has_words(ticket: Ticket) -> bool:
    return bool(ticket.words)


@Node(wrap_to_async=False)
def scan_word(ticket: Ticket) -> None:
    if ticket.words.pop() in ("outage", "down", "again"):
        ticket.priority = "high"


@Node(wrap_to_async=False)
def is_urgent(ticket: Ticket) -> bool:
    return ticket.priority == "high"


@Node(wrap_to_async=False)
def page_on_call(ticket: Ticket) -> None:
    ticket.priority = "paged"


@Node(wrap_to_async=False)
def file_it(ticket: Ticket) -> None:
    pass


GRAPH = NodeCompose(tokenize, WHILE(has_words).ACTION(scan_word), IF(is_urgent, page_on_call).ELSE(file_it)).render()


def make_request():
    """The factory the runner calls in each build's worker.

    It returns an async callable, timed per call: one request, a new interpreter over the graph
    with the request's own context in its pools. (A factory may also return the rendered graph
    itself, when its nodes need no injected context: each run is then a new interpreter over it.)
    """

    async def one_request() -> None:
        ticket = Ticket()
        await WorkflowInterpreter(GRAPH, extra_args=(ticket,)).run()
        assert ticket.priority == "paged", ticket  # a benchmark that checks what it ran

    return one_request


def main() -> int:
    import amrita_sense

    builds = "compiled,pure" if amrita_sense.IMPLEMENTATION == "cython" else "pure"
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder) / "bench.json"
        command = [
            sys.executable,
            *("-m", "amrita_sense.bench", "--workflow", f"{Path(__file__).resolve()}:make_request"),
            *("--quick", "--workflow-runs", "200", "--builds", builds, "--loop", "asyncio", "--json", str(results)),
        ]
        print("$", " ".join(command[1:]), flush=True)  # before the runner writes to the same output
        done = subprocess.run(command)
        if done.returncode != 0:
            return done.returncode
        report = json.loads(results.read_text())
    for result in report["results"]:  # the same numbers as the table, for your own tooling
        for build, cell in result["builds"].items():
            per_request = f"{cell['median'] * 1e6:.1f} us per request"
            print(f"{build}: {cell['status']}, {per_request}, same nodes: {cell['comparable']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
