"""Produce validation cost with and without record-level checks (KIP-467):
`python bench/record_checks_bench.py [--repeat N]`.

validate_for_leader on one uncompressed batch of 1, 1,000 and 10,000 records of 60
bytes, keyed, timestamps now: the default topic (headers only), a compacted topic (keys
read), a topic with `message.timestamp.before.max.ms` set (records decoded), and a batch
whose largest timestamp is past `after.max.ms` (refused, every record named). Prints µs
per call and the ratio to the default topic. Nothing else runs: one core, no I/O.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `odradek` importable from src/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from odradek.protocol.errors import KafkaError
from odradek.protocol.records import NewRecord, encode_batch
from odradek.storage.log_config import LogConfig
from odradek.storage.validator import validate_for_leader

NOW = 1_800_000_000_000
CONFIGS = {
    "default": LogConfig(),
    "compacted": LogConfig(cleanup_policy=("compact",)),
    "before.max.ms set": LogConfig(message_timestamp_before_max_ms=60_000),
}


def _time(call: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(f"{'records':>8} {'topic':>22} {'µs/call':>10} {'x default':>10}")
    for n in (1, 1_000, 10_000):
        good = bytearray(encode_batch([NewRecord(key=b"k%d" % i, value=b"v" * 60,
                                                 timestamp=NOW) for i in range(n)]))
        late = bytearray(encode_batch([NewRecord(key=b"k", value=b"v" * 60,
                                                 timestamp=NOW + 7_200_000)] * n))
        base = 0.0
        for name, config in CONFIGS.items():
            us = _time(lambda c=config, b=good: validate_for_leader(b, c, NOW, "t-0"), args.repeat)
            base = base or us
            print(f"{n:>8} {name:>22} {us:>10.1f} {us / base:>10.1f}")

        def refused(batch: bytearray = late) -> None:
            try:
                validate_for_leader(batch, CONFIGS["default"], NOW, "t-0")
            except KafkaError:
                return
            raise AssertionError("a late batch passed")

        us = _time(refused, args.repeat)
        print(f"{n:>8} {'refused: all too late':>22} {us:>10.1f} {us / base:>10.1f}")


if __name__ == "__main__":
    main()
