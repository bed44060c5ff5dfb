"""Small helpers of the durable-run tests: recording nodes, parking a run at a gate."""

from __future__ import annotations

import asyncio
import json
import struct
import zlib
from typing import Any

from amrita_sense import Node
from amrita_sense.durable import Keyring
from amrita_sense.durable.snapshots import format as fmt
from amrita_sense.streaming import SuspendObjectStream

PC = "WorkflowInterpreter::each_node"


def rec(trace: list, name: str, *, exc: BaseException | None = None, mode: str = "inline") -> Any:
    """A node named `name` (tag `NodeSuspend::name`) that appends `name` to `trace`, then raises `exc`."""
    if mode == "async":

        async def body() -> Any:
            trace.append(name)
            if exc is not None:
                raise exc
            return name

    else:

        def body() -> Any:
            trace.append(name)
            if exc is not None:
                raise exc
            return name

    body.__name__ = body.__qualname__ = name
    return Node(wrap_to_async=mode == "thread")(body)


def tag(name: str) -> str:
    return f"NodeSuspend::{name}"


async def park(stream: SuspendObjectStream, start: Any, *tags: str) -> asyncio.Task:
    """Request a park at `tags`, start `start()` (a coroutine) as a task, return it once parked."""
    request = asyncio.ensure_future(stream.wait_to_suspend(*tags))
    await asyncio.sleep(0)
    task = asyncio.ensure_future(start())
    done, _ = await asyncio.wait({request, task}, return_when=asyncio.FIRST_COMPLETED)
    if request not in done:
        request.cancel()
        task.result()
        raise AssertionError(f"the run ended without parking at {tags}")
    return task


async def abandon(task: asyncio.Task) -> None:
    """Cancel a parked run (as a process that exits would leave it)."""
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


KEYS = Keyring({"tests": b"a test key, never a real one"})
"""The keyring the tests sign and check their checkpoints with."""


def reframed(data: bytes, *, version: int | None = None, document: dict | None = None, engine: bytes | None = None):
    """`data` with another format version, engine document or raw (compressed) engine section, and
    a valid checksum; the engine section given or made here is zlib-compressed (flag bit 0)."""
    decoded = fmt.decode(data)
    head = bytearray(data[:40])
    if engine is None:
        engine = zlib.compress(json.dumps(document if document is not None else decoded.document).encode())
    outline = decoded.outline
    user = data[40 + decoded.header.engine_len + decoded.header.outline_len :]
    if version is not None:
        struct.pack_into("<H", head, 4, version)
    head[7] = 1
    struct.pack_into("<III", head, 24, len(engine), len(outline), len(user))
    crc = zlib.crc32(user, zlib.crc32(outline, zlib.crc32(engine, zlib.crc32(bytes(head[:36])))))
    struct.pack_into("<I", head, 36, crc)
    return bytes(head) + engine + outline + user
