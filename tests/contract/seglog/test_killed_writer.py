"""The segment log's promise across a crash: a writer killed between a write and its sync loses
nothing it acknowledged (the torn tail is padded over at the next start)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

from support.seglog import open_log, stop_log

from tracescorer.seglog import TRACES
from tracescorer.seglog.segments import segments

_WRITER = """
import asyncio, os, sys
from tracescorer.seglog import SegmentLog, TRACES
from tracescorer.seglog.segments import HEADER

async def main():
    log = SegmentLog(sys.argv[1], min_free_bytes=0)
    await log.start()
    for i in range(50):
        offset = await log.append(TRACES, b"acked-%d" % i)
        print(offset, flush=True)  # acknowledged: the parent counts it
    # the next request's bytes are written but the process dies before they are synced
    os.write(log._fd, HEADER.pack(5000, 0, TRACES) + b"x" * 700)
    print("torn", flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


async def test_a_writer_killed_between_a_write_and_its_sync_loses_nothing_acknowledged(tmp_path):
    path = tmp_path / "log"
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    assert proc.stdout is not None
    acked = []
    for line in proc.stdout:
        if line.strip() == "torn":
            break
        acked.append(int(line))
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    [(_, segment)] = segments(path)
    physical = segment.stat().st_size
    log = await open_log(path)
    try:
        records = await asyncio.to_thread(log.read, 0, 1 << 20)
        assert [r.offset for r in records] == acked and len(acked) == 50
        assert [r.payload for r in records] == [b"acked-%d" % i for i in range(50)]
        # the torn bytes are padded over, not cut back: the next offset is past every one written
        assert [(d.start, d.end) for d in log.damage] == [(records[-1].end, physical)]
        assert await log.append(TRACES, b"after") == physical
    finally:
        await stop_log(log)
