"""The least a checkpointed SQLite request can cost (`python -m bench.durable_essential`): every row
serves its requests and passes its checks, and the report's arithmetic is the module's."""

import asyncio
import sqlite3

import pytest

from amrita_sense.bench.scenarios import CountMismatch
from amrita_sense.bench.scenarios.durable_work import DURABLE_CHAIN_NODES, durable_chain_result, our_snapshots
from bench import durable_essential


def test_every_row_serves_and_checks_its_requests():
    seconds = asyncio.run(durable_essential.measure(rounds=1, n=3))
    assert set(seconds) == set(durable_essential.ROWS)
    assert all(value > 0 for value in seconds.values())


def test_the_essential_chain_pickles_signs_and_writes_each_save(tmp_path):
    saves = asyncio.run(our_snapshots())
    chain = durable_essential.WritingChain(saves, str(tmp_path / "e.db"), essential=True)
    try:
        assert asyncio.run(chain.request(4)) == durable_chain_result(4)
        assert chain.stored() == (len(saves), saves[-1])
        assert len(chain.signatures) == DURABLE_CHAIN_NODES
        signer = chain.signer
        assert chain.signatures[-1] == signer.signed_trailer(b"", b"", saves[-1])
    finally:
        chain.conn.close()


def test_a_wrong_stored_save_fails_the_check(tmp_path):
    saves = asyncio.run(our_snapshots())
    path = str(tmp_path / "w.db")

    async def served() -> tuple:
        timed, check, close = await durable_essential._chain_plan(saves, path, False, 2)
        await timed()
        return check, close

    check, close = asyncio.run(served())
    try:
        check()
        with sqlite3.connect(path) as other:
            other.execute("UPDATE floor SET data = x'00'")
        with pytest.raises(CountMismatch):
            check()
    finally:
        close()


def test_the_report_gives_what_a_save_may_spend_at_the_target():
    seconds = {"floor": 100e-6, "engine + write": 110e-6, "essential": 130e-6, "ours": 230e-6}
    lines = durable_essential.report(seconds, saves=10)
    assert "1.30x floor" in lines[2] and "2.30x floor" in lines[3]
    assert "may spend 2.0 us beyond the essential work; ours spends 10.0 us" in lines[-1]
