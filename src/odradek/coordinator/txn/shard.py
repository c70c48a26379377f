"""One `__transaction_state` partition's transactional ids: the transaction
coordinator's state machine on the coordinator runtime.

`replay` takes each record of the partition as the load reads it: the last record
for a transactional id wins and a tombstone removes it. Once loaded, the coordinator
finishes the transactions it finds prepared (their markers may not all be written).
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.coordinator.txn.metadata import TransactionMetadata, TxnState
from odradek.protocol.batch import BatchHeader
from odradek.protocol.records import Record
from odradek.protocol.txn_records import Malformed, decode_key, decode_value


class TxnShard:
    def __init__(self, partition: int,
                 on_loaded: Callable[[TxnShard], None]) -> None:
        self.partition = partition
        self.txns: dict[str, TransactionMetadata] = {}
        self._on_loaded = on_loaded

    def replay(self, batch: BatchHeader, record: Record) -> None:
        if record.key is None:
            return
        transactional_id = decode_key(record.key)
        if transactional_id is None:
            return  # another key version: not ours to read
        if record.value is None:
            self.txns.pop(transactional_id, None)
            return
        value = decode_value(record.value)
        if value.status not in TxnState.__members__.values() \
                or value.status == TxnState.PREPARE_EPOCH_FENCE:
            raise Malformed(f"unknown transaction status {value.status}")
        self.txns[transactional_id] = TransactionMetadata.from_log(transactional_id, value)

    def replay_end_transaction(self, producer_id: int, commit: bool) -> None:
        """No transactions are written into `__transaction_state` itself."""

    def on_loaded(self) -> None:
        self._on_loaded(self)

    def on_unloaded(self) -> None:
        self.txns.clear()
