"""The thread benchmark (`python -m bench.threads`) runs once at a small size and checks its runs."""

import asyncio

from bench import threads


def test_every_run_of_every_thread_finishes_with_its_result():
    graph = threads.shared_graph()
    one = threads.Ctx(1)
    asyncio.run(threads.WorkflowInterpreter(graph, extra_kwargs={"ctx": one}).run())
    assert (one.left, one.total) == (0, 1544)
    assert threads.one_round(graph, 3, 40, 8, asyncio.new_event_loop) > 0
    assert threads.main(["--threads", "1", "2", "--runs", "20", "--repeat", "1"]) == 0
