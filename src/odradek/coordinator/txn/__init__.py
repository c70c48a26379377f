"""coordinator/txn: transactions over `__transaction_state`.

`TransactionCoordinator` (coordinator.py) is the entry point; metadata.py is a
transactional id's state machine, shard.py one partition's ids on the coordinator
runtime (its replay of `__transaction_state`).
"""

from odradek.coordinator.txn.coordinator import (
    TRANSACTION_STATE_TOPIC,
    MarkerWriter,
    TransactionCoordinator,
    TxnConfig,
    TxnLog,
)
from odradek.coordinator.txn.metadata import TransactionMetadata, TxnState

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "MarkerWriter",
    "TransactionCoordinator",
    "TransactionMetadata",
    "TxnConfig",
    "TxnLog",
    "TxnState",
]
