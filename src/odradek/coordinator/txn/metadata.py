"""A transactional id's state: Kafka's TransactionMetadata and its state machine.

    Empty / Complete* ──AddPartitions, AddOffsets──▶ Ongoing
    Ongoing ──EndTxn(commit)──▶ PrepareCommit ──all markers written──▶ CompleteCommit
    Ongoing ──EndTxn(abort), timeout, fence──▶ PrepareAbort ──markers──▶ CompleteAbort
    Empty / Complete* ──InitProducerId──▶ Empty with the next epoch (from Ongoing: the
        transaction is fenced and aborted first)
    Empty / Complete* ──transactional.id.expiration.ms──▶ Dead (a tombstone; forgotten)
    Empty / Complete* ──EndTxn(abort) at transaction version 2──▶ PrepareAbort (KIP-890:
        an abort with no partition is still an epoch bump)

Transaction version 2 (KIP-890 part 2, a client's EndTxn v5): PrepareCommit and
PrepareAbort bump the epoch, so the markers carry the new one and fence every write of
the transaction just ended; an exhausted epoch moves to the next producer id (chosen
at Prepare*, taken at Complete*).

A change is prepared (`prepare_*` returns the target as a `TxnTransit` and marks the
state pending), written to `__transaction_state`, and only then applied (`complete`):
what the coordinator answers is always what its log says. While a change is pending,
other requests for the id get CONCURRENT_TRANSACTIONS and retry.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from odradek.protocol.errors import ErrorCode
from odradek.protocol.txn_records import TxnLogValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767

TopicPartition = tuple[str, int]


class TxnState(enum.IntEnum):
    """The ids are the status byte of TransactionLogValue."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """As DescribeTransactions and ListTransactions name it."""
        return _NAMES[self]

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {name: state for state, name in _NAMES.items()}

_S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE, _S.EMPTY,
                                 _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}
EXPIRABLE = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
PREPARED = frozenset({_S.PREPARE_COMMIT, _S.PREPARE_ABORT})
TV2 = 2  # the transaction version from which every transaction ends with an epoch bump


def is_epoch_exhausted(epoch: int) -> bool:
    # one epoch is kept in reserve so a fence can still bump it
    return epoch >= MAX_EPOCH - 1


class IllegalTransition(Exception):
    """A transition the state machine forbids: a coordinator bug, never a client's."""


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The state a prepared change leads to; written to the log before it applies."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int
    last_update_ms: int
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    def log_value(self) -> TxnLogValue:
        by_topic: dict[str, tuple[int, ...]] | None = None
        if self.state != TxnState.EMPTY:
            by_topic = {}
            for topic, partition in sorted(self.partitions):
                by_topic[topic] = (*by_topic.get(topic, ()), partition)
        return TxnLogValue(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            timeout_ms=self.timeout_ms,
            status=int(self.state),
            partitions=by_topic,
            last_update_ms=self.last_update_ms,
            start_ms=self.start_ms,
            previous_producer_id=self.last_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )

    @property
    def log_value_version(self) -> int:
        """v1 (flexible, with the tagged ids and version) once a transaction version 2
        client uses the id, as Kafka writes it; v0 otherwise, readable by older tools."""
        return 1 if (self.client_transaction_version >= TV2
                     or self.next_producer_id != NO_PRODUCER_ID) else 0


@dataclass(eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1  # when the ongoing transaction began (its first partition)
    last_update_ms: int = -1
    pending: TxnState | None = None
    # a fence whose log write failed already bumped the epoch: the next does not again
    failed_epoch_fence: bool = False
    next_producer_id: int = NO_PRODUCER_ID  # where an exhausted epoch moves (TV2)
    client_transaction_version: int = 0  # of the requests that began the transaction

    @classmethod
    def from_log(cls, transactional_id: str, value: TxnLogValue) -> TransactionMetadata:
        state = TxnState(value.status)
        partitions = {(t, p) for t, ps in (value.partitions or {}).items() for p in ps}
        return cls(transactional_id, value.producer_id, value.producer_epoch,
                   value.timeout_ms, state,
                   last_producer_id=value.previous_producer_id,
                   partitions=partitions, start_ms=value.start_ms,
                   last_update_ms=value.last_update_ms,
                   next_producer_id=value.next_producer_id,
                   client_transaction_version=value.client_transaction_version)

    @property
    def pending_transition(self) -> bool:
        return self.pending is not None

    @property
    def is_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    # ---- preparing changes ------------------------------------------------------------

    def _prepare(self, state: TxnState, *, producer_id: int | None = None,
                 producer_epoch: int | None = None, last_producer_epoch: int | None = None,
                 timeout_ms: int | None = None,
                 partitions: frozenset[TopicPartition] | None = None,
                 start_ms: int | None = None, last_update_ms: int | None = None,
                 last_producer_id: int | None = None, next_producer_id: int | None = None,
                 client_transaction_version: int | None = None) -> TxnTransit:
        if self.pending is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: {state.kafka_name} while {self.pending.kafka_name} "
                "is pending")
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(
                f"{self.transactional_id}: {self.state.kafka_name} → {state.kafka_name}")
        self.pending = state
        return TxnTransit(
            producer_id=self.producer_id if producer_id is None else producer_id,
            last_producer_id=(self.last_producer_id if last_producer_id is None
                              else last_producer_id),
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            last_producer_epoch=(self.last_producer_epoch if last_producer_epoch is None
                                 else last_producer_epoch),
            timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            state=state,
            partitions=frozenset(self.partitions) if partitions is None else partitions,
            start_ms=self.start_ms if start_ms is None else start_ms,
            last_update_ms=self.last_update_ms if last_update_ms is None else last_update_ms,
            next_producer_id=(self.next_producer_id if next_producer_id is None
                              else next_producer_id),
            client_transaction_version=(self.client_transaction_version
                                        if client_transaction_version is None
                                        else client_transaction_version),
        )

    def prepare_fence(self) -> TxnTransit:
        """Bump the epoch to fence the current producer; the open transaction aborts
        with the new epoch (Kafka's prepareFenceProducerEpoch)."""
        if self.producer_epoch >= MAX_EPOCH:
            raise IllegalTransition(f"{self.transactional_id}: epoch {MAX_EPOCH} cannot grow")
        epoch = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(TxnState.PREPARE_EPOCH_FENCE, producer_epoch=epoch,
                             last_producer_epoch=NO_PRODUCER_EPOCH)

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None,
                                now: int) -> TxnTransit | ErrorCode:
        """InitProducerId on an idle id: the next epoch. With the producer's own epoch
        (KIP-360), the same epoch again if that is a retry of a bump that succeeded,
        PRODUCER_FENCED if another producer took over meanwhile."""
        if self.is_epoch_exhausted:
            raise IllegalTransition(f"{self.transactional_id}: no epoch left")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            return ErrorCode.producer_fenced
        return self._prepare(TxnState.EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                             timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1,
                             last_update_ms=now)

    def prepare_rotation(self, new_producer_id: int, timeout_ms: int, now: int,
                         record_last_epoch: bool) -> TxnTransit:
        """The epochs of this producer id are used up: a new id at epoch 0."""
        return self._prepare(
            TxnState.EMPTY, producer_id=new_producer_id, last_producer_id=self.producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1, last_update_ms=now)

    def prepare_add_partitions(self, added: set[TopicPartition], now: int,
                               client_transaction_version: int = 0) -> TxnTransit:
        starting = self.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                  TxnState.COMPLETE_ABORT)
        partitions = frozenset(added) if starting else frozenset(self.partitions | added)
        return self._prepare(TxnState.ONGOING, partitions=partitions,
                             start_ms=now if starting else self.start_ms, last_update_ms=now,
                             client_transaction_version=client_transaction_version)

    def prepare_end(self, commit: bool, now: int, client_transaction_version: int = 0,
                    next_producer_id: int = NO_PRODUCER_ID) -> TxnTransit:
        """PrepareCommit / PrepareAbort. At transaction version 2 with the next epoch
        (Kafka's prepareAbortOrCommit), which the markers carry; an abort of no
        transaction (from Empty or Complete*) starts and ends now."""
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        bump = client_transaction_version >= TV2
        nothing_added = self.state != TxnState.ONGOING
        return self._prepare(
            state, last_update_ms=now,
            producer_epoch=self.producer_epoch + 1 if bump else None,
            last_producer_epoch=self.producer_epoch if bump else None,
            start_ms=now if nothing_added else None,
            partitions=frozenset() if nothing_added else None,
            next_producer_id=next_producer_id,
            client_transaction_version=client_transaction_version)

    def prepare_complete(self, now: int) -> TxnTransit:
        state = (TxnState.COMPLETE_COMMIT if self.state == TxnState.PREPARE_COMMIT
                 else TxnState.COMPLETE_ABORT)
        self.failed_epoch_fence = False
        if self.client_transaction_version >= TV2 and self.next_producer_id != NO_PRODUCER_ID:
            # the epoch overflowed at Prepare*: the producer goes on with the next id
            return self._prepare(state, partitions=frozenset(), last_update_ms=now,
                                 producer_id=self.next_producer_id, producer_epoch=0,
                                 last_producer_id=self.producer_id,
                                 next_producer_id=NO_PRODUCER_ID)
        return self._prepare(state, partitions=frozenset(), last_update_ms=now,
                             next_producer_id=NO_PRODUCER_ID)

    def prepare_dead(self) -> TxnTransit:
        return self._prepare(TxnState.DEAD, partitions=frozenset())

    # ---- applying them ------------------------------------------------------------------

    def complete(self, transit: TxnTransit) -> None:
        """The log took the change: it becomes the state."""
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.start_ms = transit.start_ms
        self.last_update_ms = transit.last_update_ms
        self.next_producer_id = transit.next_producer_id
        self.client_transaction_version = transit.client_transaction_version
        self.pending = None

    def cancel(self) -> None:
        """The log refused the change: nothing happened."""
        self.pending = None
