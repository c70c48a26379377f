"""Start-up time per GB of log: `python bench/recovery_bench.py [--size-mb N] ...`.

Writes `--partitions` partitions holding `--size-mb` in all into one log dir, then
times a LogManager start-up three ways:
- after a crash (no clean-shutdown marker, no recovery-point checkpoint): every
  segment is scanned — headers, sizes, CRCs, offsets — and its indexes rebuilt, with
  `num.recovery.threads.per.data.dir` = 1 and = `--threads`;
- after a clean shutdown (the marker is there): the files are trusted after cheap
  sanity checks, so a restart costs next to nothing per GB.
`--drop-caches` (root only) empties the page cache before each start, so the crash
numbers include reading the disk; without it the data is read from memory and the
figure is the CPU cost of the scan.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `odradek` importable from src/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from odradek.protocol.records import NewRecord, encode_batch
from odradek.storage.checkpoints import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT
from odradek.storage.log_config import LogConfig
from odradek.storage.manager import LogManager

MB = 1024 * 1024
GB = 1024 * MB
CLUSTER = "recovery-bench-cluster1"


def build(directory: Path, size_mb: int, partitions: int, record_size: int,
          batch_records: int, config: LogConfig) -> int:
    m = LogManager([directory], node_id=1, cluster_id=CLUSTER, config=config)
    m.startup()
    batch = bytearray(encode_batch([NewRecord(value=b"x" * record_size)] * batch_records))
    per_partition = size_mb * MB // partitions
    for p in range(partitions):
        lg = m.create("bench", p)
        while lg.size_in_bytes < per_partition:
            lg.append_as_leader(bytearray(batch), 0)
    total = sum(lg.size_in_bytes for lg in m.all_logs())
    m.shutdown()
    return total


def drop_caches() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def timed_start(directory: Path, config: LogConfig, threads: int, *, crash: bool,
                drop: bool) -> float:
    if crash:
        (directory / CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        (directory / RECOVERY_POINT_CHECKPOINT).unlink(missing_ok=True)
    if drop and not drop_caches():
        print("  (could not drop the page cache: not root?)")
    m = LogManager([directory], node_id=1, cluster_id=CLUSTER, config=config,
                   recovery_threads_per_dir=threads)
    started = time.monotonic()
    m.startup()
    elapsed = time.monotonic() - started
    m.shutdown()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=512)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--batch-records", type=int, default=100)
    parser.add_argument("--segment-mb", type=int, default=128)
    parser.add_argument("--threads", type=int, default=2,
                        help="num.recovery.threads.per.data.dir for the second crash run")
    parser.add_argument("--drop-caches", action="store_true")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    config = LogConfig(segment_bytes=args.segment_mb * MB, retention_ms=-1)
    workdir = Path(tempfile.mkdtemp(prefix="recovery-bench-", dir=args.workdir))
    try:
        started = time.monotonic()
        total = build(workdir, args.size_mb, args.partitions, args.record_size,
                      args.batch_records, config)
        print(f"log dir: {total / MB:.0f} MB in {args.partitions} partitions, "
              f"{args.record_size} B records, {args.batch_records} per batch "
              f"(written in {time.monotonic() - started:.1f} s)")
        gb = total / GB
        for threads in sorted({1, args.threads}):
            t = timed_start(workdir, config, threads, crash=True, drop=args.drop_caches)
            print(f"after a crash, {threads} recovery thread(s): {t:.2f} s "
                  f"= {t / gb:.2f} s/GB ({total / MB / t:.0f} MB/s)")
        t = timed_start(workdir, config, 1, crash=False, drop=args.drop_caches)
        print(f"after a clean shutdown: {t:.3f} s = {t / gb:.3f} s/GB")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
