"""The values a `Log` hands out, and partition directory names.

Kept apart from log.py so the log's module holds behaviour only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from odradek.storage.file_records import FileRecords

__all__ = ["AppendInfo", "ReadResult", "now_ms", "parse_topic_partition"]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_topic_partition(name: str) -> tuple[str, int]:
    """`<topic>-<partition>` → (topic, partition); topics may hold '-' and '.'."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"{name!r} is not a <topic>-<partition> directory name")
    return topic, int(partition)


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    records_count: int
    duplicate: bool = False  # an idempotent retry: nothing written, the original's offsets

    @classmethod
    def of_duplicate(cls, first_offset: int, last_offset: int, timestamp: int,
                     log_start_offset: int, log_append_time: bool) -> AppendInfo:
        """The original's offsets, answered again for an idempotent retry."""
        return cls(first_offset, last_offset, timestamp, last_offset,
                   timestamp if log_append_time else -1, log_start_offset,
                   last_offset - first_offset + 1, duplicate=True)


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: bytes | FileRecords  # whole batches (possibly b""), or a slice of a file
    first_offset: int  # base offset of the first batch, or the offset asked for
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    segment_base_offset: int = -1  # where the read started, for delayed-fetch bookkeeping
    position: int = -1
