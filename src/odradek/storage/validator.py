"""LogValidator: what a produce's batches must satisfy before they are appended.

Everything here works on the 61-byte batch headers; no record is decoded on the
produce path. Validation is pure (it raises, it never mutates); offset assignment
then patches the headers in place — base offset and partition leader epoch lie
outside the CRC, and only a LogAppendTime topic costs a CRC recomputation.

Errors, as Kafka reports them:
- CorruptMessage: not whole v2 batches, leftover bytes, bad CRC, unknown codec;
- MessageTooLarge: a batch above `max.message.bytes`;
- InvalidRecord: empty input, record count not matching the offset range, a control
  batch from a client, a producer id without a sequence;
- RecordValidation (INVALID_RECORD or INVALID_TIMESTAMP with the bad records' indexes,
  KIP-467): a record without a key in a compacted topic, a CreateTime timestamp outside
  `message.timestamp.before.max.ms` / `message.timestamp.after.max.ms` — the checks
  that read records, done only when the topic's config or a batch header calls for
  them (record_checks.py).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from odradek.configdef import LONG_MAX
from odradek.protocol.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_TIMESTAMP_TYPE,
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    NO_TIMESTAMP,
    BatchHeader,
    Compression,
    compute_crc,
    crc_is_valid,
    iter_headers,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from odradek.protocol.errors import (
    CorruptMessage,
    InvalidRecord,
    KafkaError,
    MessageTooLarge,
)
from odradek.storage.log_config import LogConfig
from odradek.storage.record_checks import check_records
from odradek.storage.segment import BatchInfo

Batches = list[tuple[int, BatchHeader]]
Buffer = bytearray | memoryview

_I16 = struct.Struct(">h")
_U32 = struct.Struct(">I")
_MAX_CODEC = max(Compression)
_TOPIC_CODECS = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


class UnexpectedAppendOffset(KafkaError):
    """A follower append whose offsets start below the log end (Kafka's
    UnexpectedAppendOffsetException); the replica fetcher truncates and retries."""


@dataclass(frozen=True, slots=True)
class AssignedBatches:
    """The batches after offset assignment: what the segment and the caller need."""

    infos: list[BatchInfo]
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    records_count: int
    size: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime


def _whole_batches(buf: Buffer, max_batch_size: int | None,
                   partition: str = "the partition") -> Batches:
    batches: Batches = []
    pos, end = 0, len(buf)
    while pos < end:
        header = read_header(buf, pos)  # CorruptMessage on a torn header or bad magic
        size = header.size
        if max_batch_size is not None and size > max_batch_size:
            raise MessageTooLarge(  # Kafka's words (UnifiedLog), a batch-level error
                f"The record batch size in the append to {partition} is {size} bytes which "
                f"exceeds the maximum configured value of {max_batch_size}."
            )
        if pos + size > end:
            raise CorruptMessage(f"batch at {pos} claims {size} bytes, {end - pos} remain")
        batches.append((pos, header))
        pos += size
    return batches


def validate_for_leader(
    buf: Buffer, config: LogConfig, now_ms: int, partition: str = "the partition"
) -> Batches:
    """Check a client's batches; returns (position, header) of each. Mutates nothing.

    `partition` names the topic partition in error messages."""
    if len(buf) == 0:
        raise InvalidRecord("produce request carries no record batch")
    batches = _whole_batches(buf, config.max_message_bytes, partition)
    create_time = not config.log_append_time
    after = config.message_timestamp_after_max_ms
    # Records are read only when the topic's config or a batch's header asks for it
    read_records = config.compact or (
        create_time and config.message_timestamp_before_max_ms < LONG_MAX)
    for pos, h in batches:
        if h.attributes & ATTR_COMPRESSION_MASK > _MAX_CODEC:
            raise CorruptMessage(f"unknown compression codec in batch at {pos}")
        if not crc_is_valid(memoryview(buf)[pos : pos + h.size], h):
            raise CorruptMessage(f"batch at {pos} fails its CRC")
        if h.last_offset_delta < 0 or h.records_count != h.last_offset_delta + 1:
            raise InvalidRecord(
                f"batch at {pos} counts {h.records_count} records for "
                f"{h.last_offset_delta + 1} offsets"
            )
        if h.attributes & ATTR_CONTROL:
            raise InvalidRecord("clients may not write control batches")
        if h.producer_id >= 0 and h.base_sequence < 0:
            raise InvalidRecord(
                f"batch of producer {h.producer_id} has invalid sequence {h.base_sequence}"
            )
        if create_time and h.max_timestamp != NO_TIMESTAMP and h.max_timestamp - now_ms > after:
            read_records = True
        if h.attributes & ATTR_TIMESTAMP_TYPE:
            read_records = True
    if read_records:
        check_records(buf, batches, config, now_ms, partition)
    return batches


def validate_for_follower(buf: Buffer, log_end_offset: int) -> Batches:
    """Check replicated batches: whole v2 batches, CRCs, offsets rising from the log end.

    A trailing partial batch, which a fetch response may end with, is left out.
    """
    batches: Batches = []
    expected = log_end_offset
    for pos, h in iter_headers(buf):
        if not crc_is_valid(memoryview(buf)[pos : pos + h.size], h):
            raise CorruptMessage(f"replicated batch at offset {h.base_offset} fails its CRC")
        if h.last_offset_delta < 0:
            raise CorruptMessage(f"replicated batch at offset {h.base_offset} is malformed")
        if h.base_offset < expected:
            if not batches:
                raise UnexpectedAppendOffset(
                    f"replicated batch starts at {h.base_offset}, below log end {expected}"
                )
            raise CorruptMessage(f"replicated offsets go back to {h.base_offset}")
        batches.append((pos, h))
        expected = h.next_offset
    return batches


def target_codec(config: LogConfig) -> Compression | None:
    """The codec the topic imposes, or None for `compression.type=producer`."""
    return _TOPIC_CODECS.get(config.compression_type)


def recompress_if_needed(
    buf: Buffer, batches: Batches, config: LogConfig
) -> tuple[Buffer, Batches]:
    """Rewrite batches whose codec differs from the topic's `compression.type`.

    The one costly path of validation, taken only when a topic asks for it.
    """
    codec = target_codec(config)
    if codec is None or all(h.attributes & ATTR_COMPRESSION_MASK == codec for _, h in batches):
        return buf, batches
    from odradek.protocol.records import recompress

    out = bytearray()
    for pos, h in batches:
        out += recompress(memoryview(buf)[pos : pos + h.size], codec)
    return out, _whole_batches(out, None)


def _clear_log_append_time(buf: Buffer, pos: int, size: int) -> None:
    # A CreateTime topic stores batches as CreateTime even if a client set the bit.
    (attributes,) = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes & ~ATTR_TIMESTAMP_TYPE)
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(memoryview(buf)[pos : pos + size]))


def assign_offsets(
    buf: Buffer,
    batches: Batches,
    first_offset: int,
    leader_epoch: int,
    log_append_time_ms: int | None,
) -> AssignedBatches:
    """Give the batches contiguous offsets from `first_offset`, in place.

    Also stamps the partition leader epoch and, when `log_append_time_ms` is given,
    LogAppendTime (which rewrites the CRC).
    """
    offset = first_offset
    infos: list[BatchInfo] = []
    max_ts, max_ts_offset = NO_TIMESTAMP, first_offset
    records = 0
    for pos, h in batches:
        set_base_offset(buf, pos, offset)
        set_partition_leader_epoch(buf, pos, leader_epoch)
        last = offset + h.last_offset_delta
        if log_append_time_ms is not None:
            set_log_append_time(buf, pos, h.size, log_append_time_ms)
            batch_ts = log_append_time_ms
        else:
            if h.attributes & ATTR_TIMESTAMP_TYPE:
                _clear_log_append_time(buf, pos, h.size)
            batch_ts = h.max_timestamp
        if batch_ts > max_ts:
            max_ts, max_ts_offset = batch_ts, last
        infos.append(BatchInfo(h.size, last, batch_ts))
        records += h.records_count
        offset = last + 1
    end = batches[-1][0] + batches[-1][1].size
    return AssignedBatches(
        infos=infos,
        first_offset=first_offset,
        last_offset=offset - 1,
        max_timestamp=max_ts,
        offset_of_max_timestamp=max_ts_offset,
        records_count=records,
        size=end,
        log_append_time=log_append_time_ms if log_append_time_ms is not None else -1,
    )


def describe_follower_batches(batches: Batches) -> AssignedBatches:
    """The same summary for replicated batches, whose offsets are already set."""
    infos: list[BatchInfo] = []
    max_ts, max_ts_offset = NO_TIMESTAMP, batches[0][1].base_offset
    records = 0
    for _, h in batches:
        if h.max_timestamp > max_ts:
            max_ts, max_ts_offset = h.max_timestamp, h.last_offset
        infos.append(BatchInfo(h.size, h.last_offset, h.max_timestamp))
        records += h.records_count
    end = batches[-1][0] + batches[-1][1].size
    return AssignedBatches(
        infos=infos,
        first_offset=batches[0][1].base_offset,
        last_offset=batches[-1][1].last_offset,
        max_timestamp=max_ts,
        offset_of_max_timestamp=max_ts_offset,
        records_count=records,
        size=end,
        log_append_time=-1,
    )
