"""`__transaction_state` records: Kafka's bytes in, the same bytes out."""

from __future__ import annotations

import struct

import pytest

from odradek.coordinator.txn import TransactionMetadata, TxnState
from odradek.protocol.txn_records import (
    Malformed,
    TxnLogValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)


def kstr(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_key_is_record_type_0_and_the_transactional_id() -> None:
    assert encode_key("txn-1") == struct.pack(">h", 0) + kstr("txn-1")
    assert decode_key(encode_key("txn-1")) == "txn-1"
    assert decode_key(struct.pack(">h", 1) + kstr("x")) is None  # not a record of ours
    with pytest.raises(Malformed):
        decode_key(b"\x00")


def test_value_v0_as_kafka_writes_it() -> None:
    # Ongoing, with two partitions of one topic (Kafka's TransactionLogValue v0 layout)
    raw = (struct.pack(">hqhib", 0, 4000, 2, 60000, 1) + struct.pack(">i", 1) + kstr("orders")
           + struct.pack(">iii", 2, 0, 1) + struct.pack(">qq", 1234, 1200))
    value = decode_value(raw)
    assert value == TxnLogValue(4000, 2, 60000, 1, {"orders": (0, 1)}, 1234, 1200)
    assert encode_value(value) == raw
    empty = TxnLogValue(5, 0, 100, 0, None, 1, -1)
    assert decode_value(encode_value(empty)) == empty  # Empty writes null partitions
    assert encode_value(empty)[-20:-16] == struct.pack(">i", -1)


def test_value_v1_round_trips_its_tagged_fields() -> None:
    value = TxnLogValue(4000, 2, 60000, 1, {"a": (3,), "b": (0, 1)}, 1234, 1200,
                        previous_producer_id=3999, client_transaction_version=2)
    assert decode_value(encode_value(value, version=1)) == value


def test_metadata_written_and_read_back() -> None:
    md = TransactionMetadata("t", 7, 3, 60000, TxnState.ONGOING, partitions={("a", 1), ("b", 0)},
                             start_ms=10, last_update_ms=20)
    transit = md.prepare_end(commit=True, now=30)
    back = TransactionMetadata.from_log("t", decode_value(encode_value(transit.log_value())))
    assert (back.state, back.producer_id, back.producer_epoch, back.partitions, back.start_ms,
            back.last_update_ms) == (TxnState.PREPARE_COMMIT, 7, 3, {("a", 1), ("b", 0)}, 10, 30)
