"""A real SIGKILL in the middle of appends loses nothing that was acknowledged."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from kafka.record.memory_records import MemoryRecords

from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig

CONFIG = LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512)

CHILD = textwrap.dedent(
    """
    import random, sys
    from pathlib import Path
    from kafka.record.default_records import DefaultRecordBatchBuilder
    from odradek.storage.log import Log
    from odradek.storage.log_config import LogConfig

    log = Log.open(
        Path(sys.argv[1]),
        LogConfig(segment_bytes=64 * 1024, index_interval_bytes=512),
        recovery_point=int(sys.argv[2]),
    )
    print("ready", log.log_end_offset, flush=True)
    next_offset = log.log_end_offset
    rng = random.Random(next_offset)
    while True:
        builder = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
        for i in range(rng.randint(1, 5)):
            # each value names the offset it must land at
            value = b"%d" % (next_offset + i) * rng.randint(1, 40)
            builder.append(i, 1_700_000_000_000, None, value, [])
        info = log.append_as_leader(builder.build(), 0)
        assert info.first_offset == next_offset
        next_offset = info.last_offset + 1
        print(info.last_offset, flush=True)
    """
)


def run_and_kill(directory: Path, recovery_point: int, acks_before_kill: int) -> int:
    """Start the writer, SIGKILL it after some acknowledgements; the highest acked offset."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), str(recovery_point)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        ready = proc.stdout.readline().split()
        assert ready and ready[0] == "ready", ready
        acked = -1
        for seen, line in enumerate(proc.stdout, start=1):
            acked = int(line)
            if seen == acks_before_kill:
                proc.send_signal(signal.SIGKILL)
                break
        # Lines already in the pipe were acknowledged before the kill too.
        for line in proc.stdout:
            if line.strip():
                acked = int(line)
    finally:
        proc.kill()  # already dead on the way that counts; on a failure, not left running
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return acked


def check_log(directory: Path, acked: int) -> int:
    log = Log.open(directory, CONFIG)
    try:
        assert log.log_end_offset > acked
        expected = 0
        offset = 0
        while offset < log.log_end_offset:
            data = log.read(offset, 1 << 20).records
            records = MemoryRecords(data)
            while records.has_next():
                batch = records.next_batch()
                for record in batch:
                    assert record.offset == expected  # in order, no gaps, no duplicates
                    assert record.value is not None
                    assert record.value.startswith(b"%d" % record.offset)
                    expected += 1
            offset = expected
        assert expected == log.log_end_offset
        return log.log_end_offset
    finally:
        log.close_without_flush()


def test_sigkill_mid_stream_keeps_every_acknowledged_batch(tmp_path: Path) -> None:
    directory = tmp_path / "crash-0"
    acked = run_and_kill(directory, 0, acks_before_kill=3000)
    end = check_log(directory, acked)
    # Again, on top of the recovered log: the writer itself recovers and continues.
    acked = run_and_kill(directory, 0, acks_before_kill=2000)
    assert acked >= end
    check_log(directory, acked)
    assert len(list(directory.glob("*.log"))) > 3
