"""The records of `__transaction_state`, in Kafka's own key and value schemas.

Sans-IO: bytes in, values out, and back; Kafka's DumpLogSegments
(`--transaction-log-decoder`) and ours read what the coordinator writes.

    key    TransactionLogKey v0     transactional id (the int16 "version" is the record type)
    value  TransactionLogValue v0   producer id · epoch · timeout · status · partitions ·
                                    last update time · start time
           TransactionLogValue v1   the same, flexible, with tagged previous/next producer
                                    ids and the client's transaction version (KIP-890)
    A null value is a tombstone: the transactional id expired.

We write v0, as Kafka does for transaction version 1 (the only one we advertise), and
read both. The status byte is the coordinator's state id; PrepareEpochFence (7) is
never written: a fence is written as PrepareAbort with the bumped epoch.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from odradek.protocol.group_records import Field, Malformed, Struct, read_message, write_message

__all__ = [
    "TRANSACTION_LOG_KEY",
    "TRANSACTION_LOG_VALUE",
    "Malformed",
    "TxnLogValue",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]

TRANSACTION_LOG_KEY = Struct("TransactionLogKey", (Field("transactionalId", "string"),))
_PARTITIONS = Struct(
    "PartitionsSchema",
    (Field("topic", "string"), Field("partitionIds", "[]int32")),
    flexible_since=1,
)
TRANSACTION_LOG_VALUE = Struct(
    "TransactionLogValue",
    (
        Field("producerId", "int64"),
        Field("previousProducerId", "int64", since=1, tag=0, default=-1),
        Field("nextProducerId", "int64", since=1, tag=1, default=-1),
        Field("producerEpoch", "int16"),
        Field("transactionTimeoutMs", "int32"),
        Field("transactionStatus", "int8"),
        Field("transactionPartitions", _PARTITIONS, nullable=True),
        Field("transactionLastUpdateTimestampMs", "int64"),
        Field("transactionStartTimestampMs", "int64"),
        Field("clientTransactionVersion", "int16", since=1, tag=2, default=0),
    ),
    flexible_since=1,
)

KEY_VERSION = 0
_INT16 = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    # topic → partitions; None for Empty, as Kafka writes it
    partitions: dict[str, tuple[int, ...]] | None = field(default=None)
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def encode_key(transactional_id: str) -> bytes:
    return write_message(TRANSACTION_LOG_KEY, KEY_VERSION, {"transactionalId": transactional_id})


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a record type this log does not hold."""
    if len(data) < 2:
        raise Malformed("Could not read version from key's buffer.")
    (record_type,) = _INT16.unpack_from(data)
    if record_type != KEY_VERSION:
        return None
    _, values = read_message(TRANSACTION_LOG_KEY, data, "key")
    return str(values["transactionalId"])


def encode_value(value: TxnLogValue, version: int = 0) -> bytes:
    partitions = None
    if value.partitions is not None:
        partitions = [{"topic": t, "partitionIds": sorted(ps)}
                      for t, ps in sorted(value.partitions.items())]
    return write_message(TRANSACTION_LOG_VALUE, version, {
        "producerId": value.producer_id,
        "previousProducerId": value.previous_producer_id,
        "nextProducerId": value.next_producer_id,
        "producerEpoch": value.producer_epoch,
        "transactionTimeoutMs": value.timeout_ms,
        "transactionStatus": value.status,
        "transactionPartitions": partitions,
        "transactionLastUpdateTimestampMs": value.last_update_ms,
        "transactionStartTimestampMs": value.start_ms,
        "clientTransactionVersion": value.client_transaction_version,
    })


def _int(value: object) -> int:
    if not isinstance(value, int):
        raise Malformed(f"expected an integer, got {value!r}")
    return value


def decode_value(data: bytes) -> TxnLogValue:
    """Raises Malformed for bytes that are not a TransactionLogValue."""
    _, v = read_message(TRANSACTION_LOG_VALUE, data)
    raw = v.get("transactionPartitions")
    partitions: dict[str, tuple[int, ...]] | None = None
    if isinstance(raw, list):
        partitions = {}
        for item in raw:
            assert isinstance(item, dict)
            ids = item["partitionIds"]
            assert isinstance(ids, list)
            topic = str(item["topic"])
            partitions[topic] = partitions.get(topic, ()) + tuple(_int(i) for i in ids)
    return TxnLogValue(
        producer_id=_int(v["producerId"]),
        producer_epoch=_int(v["producerEpoch"]),
        timeout_ms=_int(v["transactionTimeoutMs"]),
        status=_int(v["transactionStatus"]),
        partitions=partitions,
        last_update_ms=_int(v["transactionLastUpdateTimestampMs"]),
        start_ms=_int(v["transactionStartTimestampMs"]),
        previous_producer_id=_int(v.get("previousProducerId", -1)),
        next_producer_id=_int(v.get("nextProducerId", -1)),
        client_transaction_version=_int(v.get("clientTransactionVersion", 0)),
    )
