"""Building logs for lifecycle tests: keyed batches, a fake clock, reading back a table."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from odradek.protocol.batch import read_header
from odradek.protocol.records import NewRecord, Record, decode_batches, encode_batch
from odradek.storage.cleaner import Cleaner, LogToClean
from odradek.storage.cleaner_manager import (
    cleanable_offsets,
    log_to_clean,
    max_compaction_delay,
)
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig
from odradek.storage.offset_map import OffsetMap

BASE_TS = 1_700_000_000_000
KV = tuple[bytes | None, bytes | None]


class Clock:
    def __init__(self, now: int = BASE_TS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def keyed_batch(pairs: Sequence[KV], ts: int = BASE_TS, **kwargs: object) -> bytearray:
    records = [NewRecord(key=k, value=v, timestamp=ts) for k, v in pairs]
    return bytearray(encode_batch(records, **kwargs))  # type: ignore[arg-type]


def compact_config(**overrides: object) -> LogConfig:
    values: dict[str, object] = {
        "cleanup_policy": ("compact",),
        "segment_bytes": 1024,
        "file_delete_delay_ms": 0,
        "min_cleanable_dirty_ratio": 0.0,
        "delete_retention_ms": 1000,
    }
    values.update(overrides)
    return LogConfig(**values)  # type: ignore[arg-type]


def open_log(path: Path, config: LogConfig, clock: Clock, name: str = "t-0") -> Log:
    return Log.open(path / name, config, clock_ms=clock)


def read_all(lg: Log, start: int | None = None) -> list[Record]:
    """Every record from `start` (default: the log start) to the high watermark."""
    out: list[Record] = []
    offset = lg.log_start_offset if start is None else start
    while offset < lg.high_watermark:
        result = lg.read(offset, 1 << 20, max_offset=lg.high_watermark)
        if not result.records:
            break
        for batch in decode_batches(result.records):
            out.extend(r for r in batch.records if r.offset >= offset)
        offset = _next_offset(result.records)
    return out


def _next_offset(data: bytes) -> int:
    pos = 0
    last = -1
    while pos < len(data):
        h = read_header(data, pos)
        last = h.last_offset
        pos += h.size
    return last + 1


def table_of(records: Iterable[tuple[bytes | None, bytes | None]]) -> dict[bytes, bytes]:
    """The table a consumer builds: last value per key, a tombstone deletes."""
    table: dict[bytes, bytes] = {}
    for key, value in records:
        if key is None:
            continue
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    return table


def clean_once(lg: Log, clock: Clock, map_bytes: int = 1 << 20,
               checkpoint: int | None = None) -> tuple[int, LogToClean]:
    """One cleaning as a cleaner thread does it (owner = this thread)."""
    first_dirty, uncleanable, _ = cleanable_offsets(lg, checkpoint, clock())
    delay = max_compaction_delay(lg, first_dirty, clock())
    ltc = log_to_clean(("t", 0), lg, first_dirty, uncleanable, delay > 0)

    def check_done(_tp: object) -> None:
        return None

    cleaner = Cleaner(0, OffsetMap(map_bytes), owner=lambda fn: fn(), check_done=check_done,
                      clock=clock)
    end, _stats = cleaner.clean(ltc)
    return end, ltc
