"""Rebuild a partition's transactional ids from `__transaction_state`, as a new leader does.

The partition is read from its log start to its log end (as Kafka loads); the last record for a
transactional id wins and a tombstone removes it — what compaction leaves behind, so
a compacted and an uncompacted log load the same state. Reads yield to the event loop
between chunks.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from odradek.coordinator.txn.metadata import TransactionMetadata, TxnState
from odradek.protocol.records import decode_batches
from odradek.protocol.txn_records import Malformed, decode_key, decode_value

if TYPE_CHECKING:
    from odradek.coordinator.txn.coordinator import TxnLog

log = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20


async def replay(txn_log: TxnLog, partition: int) -> dict[str, TransactionMetadata]:
    found: dict[str, TransactionMetadata] = {}
    position = txn_log.log_start_offset(partition)
    while True:
        data, log_end = txn_log.read(partition, position, CHUNK_BYTES)
        if position >= log_end or not data:
            break
        for batch in decode_batches(data):
            position = batch.last_offset + 1
            if batch.is_control:
                continue
            for record in batch:
                if record.key is None:
                    continue
                try:
                    transactional_id = decode_key(record.key)
                    if transactional_id is None:
                        continue
                    if record.value is None:
                        found.pop(transactional_id, None)
                        continue
                    value = decode_value(record.value)
                    if value.status not in TxnState.__members__.values() \
                            or value.status == TxnState.PREPARE_EPOCH_FENCE:
                        raise Malformed(f"unknown transaction status {value.status}")
                    found[transactional_id] = TransactionMetadata.from_log(
                        transactional_id, value)
                except (Malformed, AssertionError, KeyError, TypeError, ValueError) as exc:
                    log.warning("skipping unreadable record at __transaction_state-%d offset "
                                "%d: %s", partition, record.offset, exc)
        await asyncio.sleep(0)
    return found
