import pytest

from amrita_sense import Node, WorkflowInterpreter


@pytest.mark.asyncio
async def test_chain_runs_in_order():
    log = []

    @Node(wrap_to_async=False)
    def a():
        log.append("a")

    @Node()
    async def b():
        log.append("b")

    interp = WorkflowInterpreter((a >> (b >> a) >> b).render())
    await interp.run()
    assert log == ["a", "b", "a", "b"]
