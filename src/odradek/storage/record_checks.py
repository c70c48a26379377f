"""The record-level half of LogValidator: checks that must read each record.

Kafka validates every record of a produce (LogValidator.validateRecord) and answers
the first batch holding bad records with INVALID_RECORD or INVALID_TIMESTAMP, the index
of each bad record in its batch and a message (KIP-467), so a client fails only those
records. Reading records costs a decode, so odradek reads them only when the topic's
configuration can make one invalid:
- a compacted topic (a record without a key);
- a CreateTime topic with `message.timestamp.before.max.ms` below its unbounded
  default (any record may be too old; the batch header holds only the first and the
  largest timestamp), or a batch whose largest timestamp is beyond
  `message.timestamp.after.max.ms` (then some of its records are);
- a batch flagged LogAppendTime where Kafka refuses that flag (a LogAppendTime topic,
  or a CreateTime topic with a batch carrying no timestamp).
Everything else is decided on the 61-byte headers (validator.py).
"""

from __future__ import annotations

from odradek.configdef import LONG_MAX
from odradek.protocol.batch import ATTR_TIMESTAMP_TYPE, NO_TIMESTAMP, BatchHeader
from odradek.protocol.errors import ErrorCode, RecordValidation
from odradek.protocol.record_reader import (
    Record,
    decode_records,
    record_keys,
    record_stamps,
    records_section,
)
from odradek.storage.log_config import LogConfig

Buffer = bytearray | memoryview
# (index in the batch, message, whether it is a timestamp error)
_Error = tuple[int, str, bool]


def _java_long(value: int) -> int:
    """Kafka prints the accepted range with Java's wrapping long arithmetic."""
    return ((value + (1 << 63)) % (1 << 64)) - (1 << 63)


def _timestamps_checked(config: LogConfig, h: BatchHeader, now_ms: int) -> bool:
    if config.log_append_time:
        return bool(h.attributes & ATTR_TIMESTAMP_TYPE)
    if h.attributes & ATTR_TIMESTAMP_TYPE and h.max_timestamp == NO_TIMESTAMP:
        return True
    if config.message_timestamp_before_max_ms < LONG_MAX:
        return True
    return h.max_timestamp != NO_TIMESTAMP and (
        h.max_timestamp - now_ms > config.message_timestamp_after_max_ms
    )


def check_records(
    buf: Buffer, batches: list[tuple[int, BatchHeader]], config: LogConfig, now_ms: int,
    partition: str,
) -> None:
    """Raise RecordValidation for the first batch holding invalid records."""
    for pos, h in batches:
        check_time = _timestamps_checked(config, h, now_ms)
        if not (config.compact or check_time):
            continue
        view = memoryview(buf)[pos : pos + h.size]
        if check_time:
            errors = _record_errors(view, h, config, now_ms, partition)
        else:
            errors = [
                (i, _no_key(partition), False)
                for i, (_, key, _v) in enumerate(
                    record_keys(view, h.base_offset, h.attributes, h.records_count))
                if key is None
            ]
        if errors:
            raise _validation_error(errors)


def _no_key(partition: str) -> str:
    return f"Compacted topic cannot accept message without key in topic partition {partition}"


def _any_bad(view: memoryview, h: BatchHeader, config: LogConfig, now_ms: int) -> bool:
    """The common case, a batch with nothing wrong, read without decoding keys and
    values; only a bad batch is decoded whole to word its errors."""
    if h.attributes & ATTR_TIMESTAMP_TYPE:
        return True  # rare: worded by the full decode
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    for _, ts, has_key in record_stamps(view, h.base_offset, h.base_timestamp, h.attributes,
                                        h.records_count):
        if config.compact and not has_key:
            return True
        if not config.log_append_time and ts != NO_TIMESTAMP and (
                now_ms - ts > before or ts - now_ms > after):
            return True
    return False


def _record_errors(
    view: memoryview, h: BatchHeader, config: LogConfig, now_ms: int, partition: str
) -> list[_Error]:
    if not _any_bad(view, h, config, now_ms):
        return []
    body = records_section(view, h.attributes, h.records_count)
    records = decode_records(body, h.records_count, h.base_offset, h.base_timestamp,
                             h.attributes, h.max_timestamp)
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    create_time = not config.log_append_time
    append_time_batch = bool(h.attributes & ATTR_TIMESTAMP_TYPE)
    errors: list[_Error] = []
    for index, r in enumerate(records):
        # Kafka's order: the key first, then the timestamp; one error per record.
        if config.compact and r.key is None:
            errors.append((index, _no_key(partition), False))
        elif create_time and r.timestamp != NO_TIMESTAMP:
            diff = now_ms - r.timestamp
            if diff > before or -diff > after:
                errors.append((index, (
                    f"Timestamp {r.timestamp} of message with offset {r.offset} is out of "
                    f"range. The timestamp should be within [{_java_long(now_ms - before)}, "
                    f"{_java_long(now_ms + after)}]"), True))
        elif append_time_batch:
            errors.append((index, (
                f"Invalid timestamp type in message {_record_repr(r)}. Producer should not "
                "set timestamp type to LogAppendTime."), True))
    return errors


def _record_repr(r: Record) -> str:
    key = 0 if r.key is None else len(r.key)
    value = 0 if r.value is None else len(r.value)
    return (f"DefaultRecord(offset={r.offset}, timestamp={r.timestamp}, key={key} bytes, "
            f"value={value} bytes)")


def _validation_error(errors: list[_Error]) -> RecordValidation:
    """Kafka's processRecordErrors: INVALID_TIMESTAMP if any record's timestamp is
    bad, else INVALID_RECORD naming the first three errors."""
    record_errors = tuple((index, message) for index, message, _ in errors)
    if any(is_time for _, _, is_time in errors):
        return RecordValidation(
            "One or more records have been rejected due to invalid timestamp",
            ErrorCode.invalid_timestamp, record_errors)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')"
                      for i, m in record_errors[:3])
    return RecordValidation(
        f"One or more records have been rejected due to {len(errors)} record errors in "
        f"total, and only showing the first three errors at most: [{shown}]",
        ErrorCode.invalid_record, record_errors)
