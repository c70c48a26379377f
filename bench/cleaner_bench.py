"""Log cleaner throughput: `python bench/cleaner_bench.py [--size-mb N] [--keys N] ...`.

Builds one compacted partition on disk (keyed records, `--dup` rounds over the key
space, so most records are superseded), then runs one cleaning of it the way a cleaner
thread does — offset map over the dirty section, every segment rewritten and swapped
in — and prints MB of log cleaned per second (Kafka's own figure: bytes read by the
cleaning over its duration), the two phases apart, and what was kept.

Nothing else runs: this is the cleaner's cost alone, on one core.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `odradek` importable from src/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from odradek.protocol.batch import Compression
from odradek.protocol.records import NewRecord, encode_batch
from odradek.storage.cleaner import Cleaner
from odradek.storage.cleaner_manager import cleanable_offsets, log_to_clean
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from odradek.storage.offset_map import OffsetMap

MB = 1024 * 1024
CODECS = {"none": Compression.NONE, "lz4": Compression.LZ4, "zstd": Compression.ZSTD,
          "gzip": Compression.GZIP, "snappy": Compression.SNAPPY}


def build_log(directory: Path, *, size_mb: int, keys: int, value_size: int,
              batch_records: int, codec: Compression, segment_mb: int,
              random_keys: bool = False) -> Log:
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=segment_mb * MB,
                       min_cleanable_dirty_ratio=0.0, file_delete_delay_ms=0)
    lg = Log.open(directory / "bench-0", config)
    # Hex of random bytes: values that compress about 2:1, as JSON events roughly do.
    pool = [os.urandom(value_size // 2 + 1).hex()[:value_size].encode() for _ in range(997)]
    rng = random.Random(7)
    i = 0
    while lg.size_in_bytes < size_mb * MB:
        records = [
            NewRecord(key=b"key-%08d" % (rng.randrange(keys) if random_keys else (i + j) % keys),
                      value=pool[(i + j) % 997])
            for j in range(batch_records)
        ]
        i += batch_records
        lg.append_as_leader(bytearray(encode_batch(records, compression=codec)), 0)
    lg.roll()  # everything written becomes cleanable
    lg.high_watermark = lg.log_end_offset
    lg.flush()
    return lg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=128, help="log size to clean")
    parser.add_argument("--keys", type=int, default=20_000, help="distinct keys")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value")
    parser.add_argument("--batch-records", type=int, default=100, help="records per batch")
    parser.add_argument("--codec", choices=sorted(CODECS), default="none")
    parser.add_argument("--segment-mb", type=int, default=64, help="segment.bytes in MiB")
    parser.add_argument("--dedupe-mb", type=int, default=128,
                        help="log.cleaner.dedupe.buffer.size in MiB")
    parser.add_argument("--random-keys", action="store_true",
                        help="keys in random order: most batches keep some records and lose "
                             "others, so they are decoded and re-encoded (the costly case)")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="cleaner-bench-", dir=args.workdir))
    try:
        started = time.monotonic()
        lg = build_log(workdir, size_mb=args.size_mb, keys=args.keys,
                       value_size=args.value_size, batch_records=args.batch_records,
                       codec=CODECS[args.codec], segment_mb=args.segment_mb,
                       random_keys=args.random_keys)
        built = time.monotonic() - started
        size = lg.size_in_bytes
        records = lg.log_end_offset
        first_dirty, uncleanable, _ = cleanable_offsets(lg, None, 0)
        ltc = log_to_clean(("bench", 0), lg, first_dirty, uncleanable, False)

        def check_done(_tp: object) -> None:
            return None

        cleaner = Cleaner(0, OffsetMap(args.dedupe_mb * MB), owner=lambda fn: fn(),
                          check_done=check_done)
        end, stats = cleaner.clean(ltc)
        total = stats.end - stats.start
        map_s = stats.map_done - stats.start
        rewrite_s = stats.end - stats.map_done
        order = "random" if args.random_keys else "round-robin"
        print(f"log: {size / MB:.1f} MB, {records} records, {args.keys} keys ({order}), "
              f"{args.value_size} B values, {args.batch_records} records/batch, "
              f"codec {args.codec} (built in {built:.1f} s)")
        print(f"cleaned to offset {end}: {stats.messages_written} records kept, "
              f"{size / MB:.1f} MB → {lg.size_in_bytes / MB:.1f} MB")
        print(f"offset map: {stats.map_bytes_read / MB:.1f} MB in {map_s:.2f} s "
              f"({stats.map_bytes_read / MB / map_s:.1f} MB/s)")
        print(f"rewrite:    {stats.bytes_read / MB:.1f} MB in {rewrite_s:.2f} s "
              f"({stats.bytes_read / MB / rewrite_s:.1f} MB/s)")
        print(f"cleaner throughput: {stats.bytes_read / MB / total:.1f} MB/s of log cleaned "
              f"({total:.2f} s for {stats.bytes_read / MB:.1f} MB; "
              f"{stats.messages_read / total / 1000:.0f} k records/s)")
        lg.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
