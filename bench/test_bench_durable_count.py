"""The durable-save counter (`python -m bench.durable_count`): each part's timed requests run and do
their work (counted by callgrind only when the counter runs; here, once, uncounted)."""

import asyncio

from amrita_sense.bench.scenarios.durable_work import DURABLE_CHAIN_NODES
from bench import durable_count


def test_every_part_runs_its_requests():
    loop = asyncio.new_event_loop()
    try:
        for part in durable_count.PARTS:
            timed = durable_count._plan(part, 2, loop)
            loop.run_until_complete(timed())
    finally:
        loop.close()


def test_the_null_store_records_each_save_as_a_store_would():
    saved = []

    class Recording(durable_count._NullStore):
        def save(self, run_id, data, **options):
            record = super().save(run_id, data, **options)
            saved.append(record)
            return record

    import pickle

    from amrita_sense.bench.scenarios.durable_work import ChainRequest, _durable_chain_graph
    from amrita_sense.durable import Checkpointing, Keyring
    from amrita_sense.runtime.workflow import WorkflowInterpreter

    interp = WorkflowInterpreter(_durable_chain_graph(), extra_args=(ChainRequest(1),))
    keyring = Keyring.generate("bench")
    interp.checkpointing = Checkpointing(Recording(), "r", codec=pickle, keyring=keyring)
    asyncio.run(interp.run())
    assert [record.version for record in saved] == list(range(1, DURABLE_CHAIN_NODES + 1))
    assert saved[-1].status == "finished"
