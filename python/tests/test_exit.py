"""The interpreter exits cleanly right after an awaitable completes.

A runtime thread resolves each asyncio future from outside the event loop
(`call_soon_threadsafe`). If the interpreter finalizes while that thread waits to take the
GIL back, Python makes it call `pthread_exit`, and the forced unwind through Rust frames
used to abort the process (exit status -6) about once in seven runs. Each child here ends
right after its last await, the moment that race needs; twenty children make a regression
show up with a probability above 95 %, and a fixed build never fails."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import guideloom as gl

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    import guideloom as gl

    async def read(storage):
        async with storage.async_reader() as reader:
            return await reader.read(0)

    storage = gl.DocumentStorage(sys.argv[1])
    print(asyncio.run(read(storage)))
    """
)

CHILDREN = 20


def test_exit_right_after_an_await_never_aborts(tmp_path: Path) -> None:
    storage = gl.DocumentStorage(str(tmp_path))
    with storage.sync_writer() as writer:
        writer.push("first")
    for run in range(CHILDREN):
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"run {run}: status {done.returncode}: {done.stderr}"
        assert done.stdout.strip() == "first"
