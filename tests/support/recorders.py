"""Recording nodes for the interpreter's API tests: each logs its name and the pointer it saw."""

from __future__ import annotations

from amrita_sense import Node, WorkflowInterpreter


def rec(log: list, name: str):
    """A loop-thread node that records `(name, pointer)` and returns `name`."""

    @Node(tag=name, wrap_to_async=False)
    def body(pc: WorkflowInterpreter):
        log.append((name, list(pc._pointer)))
        return name

    return body


def act(log: list, name: str, action):
    """A loop-thread node that records its name and pointer, then runs `action(pc)`."""

    @Node(tag=name, wrap_to_async=False)
    def body(pc: WorkflowInterpreter):
        log.append((name, list(pc._pointer)))
        return action(pc)

    return body


def act_async(log: list, name: str, action):
    """An `async def` node that records its name and pointer, then awaits `action(pc)`."""

    @Node(tag=name)
    async def body(pc: WorkflowInterpreter):
        log.append((name, list(pc._pointer)))
        return await action(pc)

    return body


def names(log: list) -> list:
    return [entry[0] for entry in log]


async def steps(interp: WorkflowInterpreter) -> list:
    return [value async for value in interp.run_step_by()]


def once(action):
    """Run `action(pc)` the first time only (a bounded backward jump)."""
    state = {"done": False}

    def guarded(pc):
        if not state["done"]:
            state["done"] = True
            action(pc)

    return guarded


def jump_graph(log: list, first_action):
    """`[j, a, (b, c, d), e]` where `j` runs `first_action` once."""
    return (
        act(log, "j", once(first_action))
        >> rec(log, "a")
        >> (rec(log, "b") >> rec(log, "c") >> rec(log, "d"))
        >> rec(log, "e")
    ).render()
