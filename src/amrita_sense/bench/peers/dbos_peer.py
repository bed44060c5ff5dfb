"""DBOS Transact's version of the durable work (runs in its own environment, see `peers/__init__.py`).

Written as DBOS's users write it: each node a `@DBOS.step()`, the chain a `@DBOS.workflow()` that
awaits them in order (`async def`: the worker's requests are awaited on a running event loop, where
DBOS's synchronous calls refuse to run), registered before `DBOS(config=...)` and `DBOS.launch()`;
each request is one `await chain(x)` under `SetWorkflowID(...)`, a new workflow id each time. DBOS
records the workflow's input, every step's output and the result in its system database before going
on: SQLite (`sqlite:///<file>`) or Postgres (`postgresql://...`). DBOS is one instance per process:
a plan launches it on its store and `DBOS.destroy()`s it when the worker is done with the plan.
DBOS has no plain mode (a workflow is always checkpointed), so it runs only the durable work. Nothing
here imports DBOS at module level: `durable` does, inside the worker that runs in its environment.
"""

from collections.abc import Callable
from typing import Any

TELEMETRY_OFF: dict = {}  # DBOS exports nothing unless given a conductor_key or OTLP endpoints (none here)

DURABLE = {work: {"sync": "each step recorded before the next"} for work in ("durable_sqlite", "durable_postgres")}
"""The durable work written for DBOS (one mode: a step's output is recorded before the next step)."""

_REGISTERED: dict = {}


def telemetry() -> str:
    """How export stands once the library is loaded (DBOS sends nothing unless configured to)."""
    import dbos  # noqa: F401

    return "no conductor_key, enable_otlp off, admin server off: nothing leaves the process"


def build(work: str, S: Any) -> Callable[[int], Any]:
    raise S.Unavailable(f"{work} is not written for DBOS (a DBOS workflow is always checkpointed: the durable work)")


def _chain(S: Any) -> Any:
    """The workflow, registered once per process (DBOS wants its functions before `launch`)."""
    if "chain" in _REGISTERED:
        return _REGISTERED["chain"]
    from dbos import DBOS

    def make_step(k: int) -> Any:
        async def step(value: int) -> int:
            return S.peer_mix(value, k)

        step.__name__ = step.__qualname__ = f"step_{k}"
        return DBOS.step(name=f"step_{k}")(step)

    steps = [make_step(k) for k in range(S.DURABLE_CHAIN_NODES)]

    @DBOS.workflow(name="chain")
    async def chain(x: int) -> int:
        value = x
        for step in steps:
            value = await step(value)
        return value

    _REGISTERED["chain"] = chain
    return chain


def durable(work: str, mode: str, S: Any, place: dict) -> Any:
    """DBOS's durable chain on an SQLite or Postgres system database; read back with
    `DBOS.retrieve_workflow_async` (its status and result) and `DBOS.list_workflow_steps_async`."""
    from dbos import DBOS, SetWorkflowID

    folder = S.durable_work.Folder(place, "dbos")
    if work == "durable_sqlite":
        url = f"sqlite:///{folder.file('dbos.sqlite')}"
        where = "an SQLite system database (sqlite:///<file>)"
    else:
        url = S.postgres_place(place, work)["url"]
        where = "a Postgres system database (postgresql://...)"
    chain = _chain(S)
    DBOS.destroy()  # one instance per process: the last plan's, if it is still there
    config = {"name": "amrita-bench", "system_database_url": url, "run_admin_server": False, "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()
    note = where
    if work == "durable_sqlite":
        import sqlite3

        probe = sqlite3.connect(folder.file("dbos.sqlite"))
        note += f": journal_mode={probe.execute('PRAGMA journal_mode').fetchone()[0]} (SQLAlchemy's pysqlite defaults)"
        probe.close()
    new_id = S.durable_work.run_ids("dbos")
    last: list = []

    async def serve(x: int) -> int:
        workflow_id = new_id()
        with SetWorkflowID(workflow_id):
            result = await chain(x)
        last[:] = [workflow_id]
        return result

    async def stored() -> int:
        workflow_id = last[0]
        handle = await DBOS.retrieve_workflow_async(workflow_id)
        status = await handle.get_status()
        if status.status != "SUCCESS":
            raise S.CountMismatch(f"{work}: workflow {workflow_id} is {status.status}")
        steps = await DBOS.list_workflow_steps_async(workflow_id)
        if len(steps) != S.DURABLE_CHAIN_NODES:
            raise S.CountMismatch(f"{work}: {len(steps)} steps recorded for {S.DURABLE_CHAIN_NODES}")
        return await handle.get_result()

    def close() -> None:
        try:
            DBOS.destroy()
        finally:
            folder.remove()

    return S.DurableSystem(serve, stored, f"DBOS: {note}", close)
