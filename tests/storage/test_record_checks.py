"""Record-level validation (KIP-467): which records are named, with Kafka's words."""

from __future__ import annotations

import pytest
from storage_helpers import BASE_TS, make_batch, set_attribute_bits

from odradek.configdef import LONG_MAX
from odradek.protocol.batch import ATTR_TIMESTAMP_TYPE
from odradek.protocol.errors import ErrorCode, RecordValidation
from odradek.storage.log_config import LogConfig
from odradek.storage.validator import validate_for_leader

NOW = BASE_TS + 10
HOUR = 3_600_000


def _refused(batch: bytearray, config: LogConfig) -> RecordValidation:
    with pytest.raises(RecordValidation) as e:
        validate_for_leader(batch, config, NOW, "t-0")
    return e.value


def test_keyless_records_of_a_compacted_topic_are_each_named() -> None:
    batch = make_batch([b"a", b"b", b"c", b"d", b"e"], keys=[b"k", None, b"k", None, None])
    e = _refused(batch, LogConfig(cleanup_policy=("compact",)))
    assert e.code == ErrorCode.invalid_record
    no_key = "Compacted topic cannot accept message without key in topic partition t-0"
    assert e.record_errors == ((1, no_key), (3, no_key), (4, no_key))
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{no_key}')" for i in (1, 3, 4))
    assert str(e) == ("One or more records have been rejected due to 3 record errors in "
                      f"total, and only showing the first three errors at most: [{shown}]")


def test_only_three_errors_are_shown_in_the_message_but_all_are_listed() -> None:
    batch = make_batch([b"v"] * 5, keys=[None] * 5)
    e = _refused(batch, LogConfig(cleanup_policy=("compact",)))
    assert [i for i, _ in e.record_errors] == [0, 1, 2, 3, 4]
    assert "due to 5 record errors" in str(e) and str(e).count("RecordError(") == 3


def test_a_timestamp_too_far_ahead_names_its_record_and_the_range() -> None:
    ts = [NOW, NOW + HOUR + 1, NOW - 5]
    e = _refused(make_batch([b"a", b"b", b"c"], timestamps=ts), LogConfig())
    assert e.code == ErrorCode.invalid_timestamp
    assert str(e) == "One or more records have been rejected due to invalid timestamp"
    # now - Long.MAX_VALUE, printed as Java computes it
    assert e.record_errors == ((1, (
        f"Timestamp {NOW + HOUR + 1} of message with offset 1 is out of range. The "
        f"timestamp should be within [{NOW - LONG_MAX}, {NOW + HOUR}]")),)


def test_a_record_older_than_the_first_is_caught_by_the_before_bound() -> None:
    # the batch header holds the first and the largest timestamp: the middle record
    # is older than both, and only reading records finds it
    ts = [NOW, NOW - 20_000, NOW]
    config = LogConfig(message_timestamp_before_max_ms=10_000)
    e = _refused(make_batch([b"a", b"b", b"c"], timestamps=ts), config)
    assert [i for i, _ in e.record_errors] == [1]
    assert f"should be within [{NOW - 10_000}, {NOW + HOUR}]" in e.record_errors[0][1]


def test_a_timestamp_error_wins_over_key_errors_in_the_code() -> None:
    batch = make_batch([b"a", b"b"], keys=[None, b"k"], timestamps=[NOW, NOW + 2 * HOUR])
    e = _refused(batch, LogConfig(cleanup_policy=("compact",)))
    assert e.code == ErrorCode.invalid_timestamp
    assert [i for i, _ in e.record_errors] == [0, 1]
    assert e.record_errors[0][1].startswith("Compacted topic cannot accept")


def test_a_log_append_time_batch_is_refused_by_a_log_append_time_topic() -> None:
    batch = set_attribute_bits(make_batch([b"a", b"b"], timestamps=[NOW, NOW]),
                               ATTR_TIMESTAMP_TYPE)
    e = _refused(batch, LogConfig(message_timestamp_type="LogAppendTime"))
    assert e.code == ErrorCode.invalid_timestamp
    assert e.record_errors[1] == (1, (
        f"Invalid timestamp type in message DefaultRecord(offset=1, timestamp={NOW}, "
        "key=0 bytes, value=1 bytes). Producer should not set timestamp type to "
        "LogAppendTime."))


def test_valid_batches_pass() -> None:
    batch = make_batch([b"a", b"b"], keys=[b"k1", b"k2"], timestamps=[NOW - 5, NOW + 5])
    config = LogConfig(cleanup_policy=("compact",), message_timestamp_before_max_ms=10)
    assert len(validate_for_leader(batch, config, NOW, "t-0")) == 1


def test_the_older_difference_bound_fills_in_for_unset_bounds() -> None:
    config = LogConfig.resolve({"message.timestamp.difference.max.ms": 1000})
    assert config.message_timestamp_before_max_ms == 1000
    assert config.message_timestamp_after_max_ms == 1000
    config = LogConfig.resolve({"message.timestamp.difference.max.ms": 1000,
                                "message.timestamp.after.max.ms": 5000})
    assert config.message_timestamp_after_max_ms == 5000
    config = LogConfig.resolve({}, {"log.message.timestamp.difference.max.ms": 7})
    assert config.message_timestamp_before_max_ms == 7
    e = _refused(make_batch([b"a"], timestamps=[NOW - 1001]),
                 LogConfig.resolve({"message.timestamp.difference.max.ms": 1000}))
    assert e.code == ErrorCode.invalid_timestamp
