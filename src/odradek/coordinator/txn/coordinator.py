"""The transaction coordinator: which transactional ids this broker coordinates, and how.

A transactional id belongs to one partition of `__transaction_state`,
`abs(javaHashCode(id)) % transaction.state.log.num.partitions`, and is coordinated by
that partition's leader. Every change of an id's state is a record there (Kafka's
schemas, protocol/txn_records.py), written before it takes effect; a new leader
replays the partition and finishes the commits and aborts it finds prepared.

Ending a transaction, as Kafka does it: the decision (PrepareCommit / PrepareAbort) is
written first, then a marker goes to every partition of the transaction, then the
outcome (CompleteCommit / CompleteAbort). The decision is durable once written: a
partition that cannot take its marker yet is retried until it does (or is deleted),
and a coordinator that restarts resends the markers of a prepared transaction.

Fencing: InitProducerId for an id whose transaction is open bumps the epoch and
aborts that transaction with the new epoch, so the markers carry it into every
partition and the old producer's later writes fail there (INVALID_PRODUCER_EPOCH) and
here (PRODUCER_FENCED). A transaction open past its `transaction.timeout.ms` is fenced
and aborted the same way by a periodic scan.

Transaction version 2 (KIP-890 part 2) is chosen per request, as Kafka does: EndTxn v5
ends the transaction with an epoch bump (end_rules.py decides retries), and a
partition leader adds partitions for the producer (AddPartitionsToTxn v5 from the
broker, `client_transaction_version` 2). The coordinator's own aborts (fences,
timeouts) follow the cluster's finalized `transaction.version`.

The coordinator runtime (coordinator/runtime) does the leadership, loading, writes
and periodic jobs; each partition's ids are a shard on it (shard.py). The broker
reaches us through `TxnLog` (the runtime's log of the `__transaction_state`
partitions) and `MarkerWriter` (the partitions' leaders: with one broker, the local
replica manager; in a cluster, WriteTxnMarkers). Nothing here knows of sockets.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.coordinator.group.coordinator import partition_for
from odradek.coordinator.runtime import (
    CoordinatorLog,
    CoordinatorRuntime,
    CoordinatorTimer,
    ShardMaps,
)
from odradek.coordinator.txn.end_rules import Answer, decide
from odradek.coordinator.txn.metadata import (
    EXPIRABLE,
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARED,
    TV2,
    TopicPartition,
    TransactionMetadata,
    TxnState,
    TxnTransit,
    is_epoch_exhausted,
)
from odradek.coordinator.txn.shard import TxnShard
from odradek.protocol.errors import ErrorCode, KafkaError
from odradek.protocol.txn_records import encode_key, encode_value

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
_RETRY_MIN_S, _RETRY_MAX_S = 0.05, 5.0


TxnLog = CoordinatorLog  # the `__transaction_state` partitions, as the broker offers them


class MarkerWriter(Protocol):
    async def write_markers(self, producer_id: int, producer_epoch: int,
                            coordinator_epoch: int, commit: bool,
                            partitions: Iterable[TopicPartition]
                            ) -> dict[TopicPartition, ErrorCode]:
        """Write one marker per partition; the error of each (NONE when written)."""


@dataclass(frozen=True)
class TxnConfig:
    """The broker settings the coordinator reads, by Kafka's names."""

    partitions: int = 50
    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 604_800_000
    abort_interval_ms: int = 10_000
    expiration_interval_ms: int = 3_600_000

    @classmethod
    def from_broker(cls, values: dict[str, Any]) -> TxnConfig:
        return cls(
            partitions=int(values["transaction.state.log.num.partitions"]),
            max_timeout_ms=int(values["transaction.max.timeout.ms"]),
            id_expiration_ms=int(values["transactional.id.expiration.ms"]),
            abort_interval_ms=int(
                values["transaction.abort.timed.out.transaction.cleanup.interval.ms"]),
            expiration_interval_ms=int(
                values["transaction.remove.expired.transaction.cleanup.interval.ms"]),
        )


# Markers that failed with these are retried; any other error ends the partition's part.
_RETRIABLE_MARKER_ERRORS = frozenset({
    ErrorCode.not_leader_or_follower, ErrorCode.not_enough_replicas,
    ErrorCode.not_enough_replicas_after_append, ErrorCode.request_timed_out,
    ErrorCode.kafka_storage_error, ErrorCode.leader_not_available,
    ErrorCode.coordinator_load_in_progress,
})


def _state_of(md: TransactionMetadata) -> TxnState:
    """The state now (after an await, not what an earlier check narrowed it to)."""
    return md.state


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class TransactionCoordinator:
    def __init__(self, config: TxnConfig, txn_log: TxnLog, markers: MarkerWriter,
                 allocate_producer_id: Callable[[], Awaitable[int]],
                 clock: Callable[[], int] = now_ms,
                 transaction_version: Callable[[], int] = lambda: 0) -> None:
        self.config = config
        self.transaction_version = transaction_version  # the cluster's finalized level
        self.log = txn_log
        self.markers = markers
        self.allocate_producer_id = allocate_producer_id
        self.clock = clock
        self._completing: set[str] = set()  # ids whose markers are being (re)sent
        self.runtime: CoordinatorRuntime[TxnShard] = CoordinatorRuntime(
            TRANSACTION_STATE_TOPIC, txn_log, self._new_shard)
        self.runtime.every(config.abort_interval_ms, self.abort_timed_out)
        self.runtime.every(config.expiration_interval_ms, self.expire_transactional_ids)

    def _new_shard(self, partition: int, timer: CoordinatorTimer) -> TxnShard:
        return TxnShard(partition, self._on_loaded)

    def _on_loaded(self, shard: TxnShard) -> None:
        if shard.txns:
            log.info("loaded %d transactional ids from %s-%d", len(shard.txns),
                     TRANSACTION_STATE_TOPIC, shard.partition)
        for md in shard.txns.values():
            if md.state in PREPARED:
                # decided before the restart: the markers may not all have been written
                self.runtime.spawn(self._complete_in_background(md))

    # ---- runtime ---------------------------------------------------------------------

    def spawn(self, coro: Any) -> None:
        self.runtime.spawn(coro)

    def start(self) -> None:
        self.runtime.start()

    def stop(self) -> None:
        self.runtime.stop()

    # ---- partitions --------------------------------------------------------------------

    @property
    def led(self) -> set[int]:
        return self.runtime.led

    @property
    def loading(self) -> set[int]:
        return self.runtime.loading

    @property
    def txns(self) -> Mapping[str, TransactionMetadata]:
        """Every id of the partitions held here (a read-only view)."""
        return ShardMaps(lambda: [shard.txns for shard in self.runtime.all_shards()])

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.partitions)

    def follow(self, led: Iterable[int]) -> None:
        """This broker leads exactly these `__transaction_state` partitions now."""
        self.runtime.follow(led)

    def on_elected(self, partitions: Iterable[int]) -> None:
        """This broker leads these `__transaction_state` partitions now: load them."""
        self.runtime.on_elected(partitions)

    def on_resigned(self, partitions: Iterable[int]) -> None:
        self.runtime.on_resigned(partitions)

    def _shard(self, transactional_id: str) -> TxnShard:
        """The id's shard, after checking this broker coordinates it (raises KafkaError)."""
        return self.runtime.shard(self.partition_for(transactional_id), transactional_id)

    def _get(self, transactional_id: str) -> TransactionMetadata | None:
        """The id's state, after checking this broker coordinates it (raises KafkaError)."""
        return self._shard(transactional_id).txns.get(transactional_id)

    def _current(self, transactional_id: str) -> TransactionMetadata | None:
        """The id's state if its partition is served here now (never raises)."""
        shard = self.runtime.active(self.partition_for(transactional_id))
        return None if shard is None else shard.txns.get(transactional_id)

    async def _write(self, md: TransactionMetadata, transit: TxnTransit) -> ErrorCode:
        """Write a prepared change; apply it if the log took it."""
        partition = self.partition_for(md.transactional_id)
        value = None if transit.state == TxnState.DEAD \
            else encode_value(transit.log_value(), transit.log_value_version)
        try:
            await self.runtime.write(partition, [(encode_key(md.transactional_id), value)])
        except KafkaError as e:
            md.cancel()
            log.warning("writing %s of %s failed: %s", transit.state.kafka_name,
                        md.transactional_id, e)
            return e.code
        except Exception:
            # whatever went wrong, the id must not stay pending: that would wedge it
            md.cancel()
            log.exception("writing %s of %s failed", transit.state.kafka_name,
                          md.transactional_id)
            return ErrorCode.unknown_server_error
        md.complete(transit)
        return ErrorCode.none

    # ---- InitProducerId ------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None
                               ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch). `expected` is the producer's own (id, epoch)
        when it asks to bump its epoch after an error (KIP-360)."""
        fail = (ErrorCode.none, -1, -1)
        if not transactional_id:
            return (ErrorCode.invalid_request, *fail[1:])
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return (ErrorCode.invalid_transaction_timeout, *fail[1:])
        for attempt in range(2):
            try:
                shard = self._shard(transactional_id)
            except KafkaError as e:
                return (e.code, *fail[1:])
            md = shard.txns.get(transactional_id)
            if md is None:
                # the id allocation may wait on ZooKeeper: look again after it (the
                # partition may have moved, or another request created the id)
                pid = await self.allocate_producer_id()
                try:
                    shard = self._shard(transactional_id)
                except KafkaError as e:
                    return (e.code, *fail[1:])
                md = shard.txns.get(transactional_id)
                if md is None:
                    md = shard.txns[transactional_id] = TransactionMetadata(
                        transactional_id, pid, NO_PRODUCER_EPOCH, timeout_ms,
                        TxnState.EMPTY, last_update_ms=self.clock())
            if md.pending_transition:
                return (ErrorCode.concurrent_transactions, *fail[1:])
            if expected is not None and not self._valid_expected(md, *expected):
                return (ErrorCode.producer_fenced, *fail[1:])
            if md.state in PREPARED or md.state == TxnState.DEAD:
                return (ErrorCode.concurrent_transactions, *fail[1:])
            if md.state == TxnState.ONGOING:
                code = await self._fence_and_abort(md)
                if code != ErrorCode.none:
                    return (code, *fail[1:])
                if attempt == 0 and _state_of(md) == TxnState.COMPLETE_ABORT:
                    continue  # aborted already (one broker): bump now, as the retry would
                return (ErrorCode.concurrent_transactions, *fail[1:])
            now = self.clock()
            if md.is_epoch_exhausted and (expected is None or expected[1] == md.producer_epoch):
                new_pid = await self.allocate_producer_id()
                now = self.clock()
                transit: TxnTransit | ErrorCode = md.prepare_rotation(
                    new_pid, timeout_ms, now, expected is not None)
            else:
                transit = md.prepare_increment_epoch(
                    timeout_ms, None if expected is None else expected[1], now)
            if isinstance(transit, ErrorCode):
                return (transit, *fail[1:])
            code = await self._write(md, transit)
            if code != ErrorCode.none:
                return (code, *fail[1:])
            log.info("initialized %s: producer id %d, epoch %d", transactional_id,
                     md.producer_id, md.producer_epoch)
            return ErrorCode.none, md.producer_id, md.producer_epoch
        return (ErrorCode.concurrent_transactions, *fail[1:])

    @staticmethod
    def _valid_expected(md: TransactionMetadata, producer_id: int, epoch: int) -> bool:
        # a new id; the current producer id (its epoch is checked when bumping); or a
        # retry of a rotation whose answer the producer never got
        return (md.producer_epoch == NO_PRODUCER_EPOCH or producer_id == md.producer_id
                or (producer_id == md.last_producer_id and is_epoch_exhausted(epoch)))

    async def _fence_and_abort(self, md: TransactionMetadata) -> ErrorCode:
        """Bump the epoch of an id whose transaction is open and abort it with the new
        epoch: its markers fence the old producer in every partition."""
        fence = md.prepare_fence()
        # at version 2 the abort bumps the fencing epoch once more (Kafka's server-side
        # aborts use the cluster's level), unless that would pass the last epoch
        version = self.transaction_version() if fence.producer_epoch < MAX_EPOCH else 0
        try:
            code, _, _ = await self._end(md.transactional_id, md.producer_id,
                                         fence.producer_epoch, commit=False,
                                         from_client=False, client_transaction_version=version)
            return code
        finally:
            if md.pending == TxnState.PREPARE_EPOCH_FENCE:
                md.pending = None

    # ---- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: set[TopicPartition],
                             client_transaction_version: int = 0) -> ErrorCode:
        """AddPartitionsToTxn from a producer (v0-v3), or from a partition leader on the
        producer's behalf at transaction version 2 (Produce v12, TxnOffsetCommit v5)."""
        if not transactional_id:
            return ErrorCode.invalid_request
        try:
            md = self._get(transactional_id)
        except KafkaError as e:
            return e.code
        if md is None or md.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if md.producer_epoch != epoch:
            return ErrorCode.producer_fenced
        if md.pending_transition or md.state in PREPARED:
            return ErrorCode.concurrent_transactions
        if md.state == TxnState.DEAD:
            return ErrorCode.invalid_producer_id_mapping
        if md.state == TxnState.ONGOING and partitions <= md.partitions:
            return ErrorCode.none
        return await self._write(md, md.prepare_add_partitions(
            partitions, self.clock(), client_transaction_version))

    def verify(self, transactional_id: str, producer_id: int, epoch: int,
               tp: TopicPartition) -> ErrorCode:
        """Is `tp` in the producer's ongoing transaction? What the partition leader asks
        before it takes a transactional write (Kafka's AddPartitionsToTxn verify_only)."""
        try:
            md = self._get(transactional_id)
        except KafkaError as e:
            return e.code
        if md is None or md.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if md.producer_epoch != epoch:
            return ErrorCode.producer_fenced
        if md.state in PREPARED:
            return ErrorCode.concurrent_transactions
        if md.state != TxnState.ONGOING or tp not in md.partitions:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    # ---- EndTxn -------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int,
                      commit: bool) -> ErrorCode:
        """EndTxn before transaction version 2 (v0-v4)."""
        code, _, _ = await self.end_transaction(transactional_id, producer_id, epoch, commit)
        return code

    async def end_transaction(self, transactional_id: str, producer_id: int, epoch: int,
                              commit: bool, client_transaction_version: int = 0
                              ) -> tuple[ErrorCode, int, int]:
        """(error, producer id, epoch): the id and epoch the producer goes on with (at
        transaction version 2 the bumped epoch, or a new id; before it, -1)."""
        return await self._end(transactional_id, producer_id, epoch, commit,
                               from_client=True,
                               client_transaction_version=client_transaction_version)

    async def _end(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                   from_client: bool, client_transaction_version: int = 0
                   ) -> tuple[ErrorCode, int, int]:
        if not transactional_id:
            return ErrorCode.invalid_request, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if client_transaction_version >= TV2:
            return await self._end_v2(transactional_id, producer_id, epoch, commit,
                                      from_client)
        code = await self._end_v1(transactional_id, producer_id, epoch, commit, from_client)
        return code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH

    async def _end_v1(self, transactional_id: str, producer_id: int, epoch: int,
                      commit: bool, from_client: bool) -> ErrorCode:
        try:
            md = self._get(transactional_id)
        except KafkaError as e:
            return e.code
        if md is None or md.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        # a client must use the current epoch; the coordinator's own aborts use a newer one
        if (from_client and epoch != md.producer_epoch) or epoch < md.producer_epoch:
            return ErrorCode.producer_fenced
        if md.pending_transition and md.pending != TxnState.PREPARE_EPOCH_FENCE:
            return ErrorCode.concurrent_transactions
        state = md.state
        if state == TxnState.ONGOING:
            fencing = not commit and md.pending == TxnState.PREPARE_EPOCH_FENCE
            if fencing:
                # the bumped epoch takes effect now: the PrepareAbort record carries it
                md.pending = None
                md.producer_epoch = epoch
                md.last_producer_epoch = NO_PRODUCER_EPOCH
            code = await self._write(md, md.prepare_end(commit, self.clock()))
            if code != ErrorCode.none:
                if fencing:
                    md.failed_epoch_fence = True
                return code
            await self._markers_after_decision(md)
            return ErrorCode.none
        if state == TxnState.COMPLETE_COMMIT:
            return ErrorCode.none if commit else ErrorCode.invalid_txn_state
        if state == TxnState.COMPLETE_ABORT:
            return ErrorCode.none if not commit else ErrorCode.invalid_txn_state
        if state == TxnState.PREPARE_COMMIT:
            return ErrorCode.concurrent_transactions if commit else ErrorCode.invalid_txn_state
        if state == TxnState.PREPARE_ABORT:
            return ErrorCode.concurrent_transactions if not commit \
                else ErrorCode.invalid_txn_state
        if state == TxnState.EMPTY:
            return ErrorCode.invalid_txn_state
        return ErrorCode.concurrent_transactions  # Dead: being expired

    async def _markers_after_decision(self, md: TransactionMetadata) -> None:
        if not await self._finish(md):
            self.spawn(self._complete_in_background(md))
        # the decision is written: the client's part is done even if a partition takes
        # its marker later

    async def _end_v2(self, transactional_id: str, producer_id: int, epoch: int,
                      commit: bool, from_client: bool) -> tuple[ErrorCode, int, int]:
        """EndTxn at transaction version 2: every end bumps the epoch (end_rules.py)."""
        fail = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        next_pid = NO_PRODUCER_ID
        for _ in range(2):
            try:
                md = self._get(transactional_id)
            except KafkaError as e:
                return (e.code, *fail)
            if md is None:
                return (ErrorCode.invalid_producer_id_mapping, *fail)
            decision = decide(md, producer_id, epoch, commit, from_client)
            if isinstance(decision, Answer):
                if decision.code == ErrorCode.none:
                    return ErrorCode.none, md.producer_id, md.producer_epoch
                return (decision.code, *fail)
            fencing = md.pending == TxnState.PREPARE_EPOCH_FENCE
            if fencing or not md.is_epoch_exhausted or next_pid != NO_PRODUCER_ID:
                break
            # the bump takes the last epoch: the producer goes on with a new id (the
            # allocation may wait on ZooKeeper, so decide again after it)
            next_pid = await self.allocate_producer_id()
        else:
            return (ErrorCode.concurrent_transactions, *fail)
        assert not isinstance(decision, Answer)
        if fencing:
            # the fencing epoch takes effect now, and the end bumps it once more
            md.pending = None
            md.producer_epoch = epoch
            md.last_producer_epoch = NO_PRODUCER_EPOCH
        transit = md.prepare_end(decision.commit, self.clock(), TV2,
                                 next_pid if md.is_epoch_exhausted and not fencing
                                 else NO_PRODUCER_ID)
        code = await self._write(md, transit)
        if code != ErrorCode.none:
            if fencing:
                md.failed_epoch_fence = True
            return (code, *fail)
        await self._markers_after_decision(md)
        if transit.next_producer_id != NO_PRODUCER_ID:
            return ErrorCode.none, transit.next_producer_id, 0
        return ErrorCode.none, transit.producer_id, transit.producer_epoch

    async def _complete(self, md: TransactionMetadata) -> bool:
        """Markers to every partition of a prepared transaction, then its outcome.
        True when done; False leaves it prepared for a retry."""
        if md.state not in PREPARED:
            return True
        commit = md.state == TxnState.PREPARE_COMMIT
        partition = self.partition_for(md.transactional_id)
        if partition not in self.runtime.led:
            return True  # the new coordinator finishes it
        if md.partitions:
            results = await self.markers.write_markers(
                md.producer_id, md.producer_epoch, self.runtime.leader_epoch(partition),
                commit, sorted(md.partitions))
            for tp, code in results.items():
                if code in _RETRIABLE_MARKER_ERRORS:
                    continue
                if code != ErrorCode.none:
                    # the partition is gone, or has a newer epoch of this producer: a
                    # marker can never be written there, and must not wedge the id
                    log.warning("%s: no %s marker for %s-%d: %s", md.transactional_id,
                                "COMMIT" if commit else "ABORT", *tp, code.name)
                md.partitions.discard(tp)
            if md.partitions:
                return False
        if md.pending_transition or md.state not in PREPARED:
            return md.state not in PREPARED
        code = await self._write(md, md.prepare_complete(self.clock()))
        return code == ErrorCode.none

    async def _finish(self, md: TransactionMetadata) -> bool:
        """`_complete`, unless markers for the id are already being sent."""
        tid = md.transactional_id
        if tid in self._completing:
            return False
        self._completing.add(tid)
        try:
            return await self._complete(md)
        finally:
            self._completing.discard(tid)

    async def _complete_in_background(self, md: TransactionMetadata) -> None:
        """Resend markers with a growing backoff until the transaction completes, the
        coordinator moves, or the id is gone."""
        tid = md.transactional_id
        if tid in self._completing:
            return
        self._completing.add(tid)
        delay = _RETRY_MIN_S
        try:
            while self._current(tid) is md and md.state in PREPARED:
                if not md.pending_transition and await self._complete(md):
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_S)
        finally:
            self._completing.discard(tid)

    # ---- timers -----------------------------------------------------------------------

    def _served(self) -> list[TransactionMetadata]:
        """Every id of the partitions served here now (a copy: the caller awaits)."""
        return [md for shard in self.runtime.active_shards() for md in shard.txns.values()]

    async def abort_timed_out(self, now: int | None = None) -> int:
        """Fence and abort transactions open past their timeout; finish prepared ones
        whose markers are still owed. Returns how many were aborted."""
        now = self.clock() if now is None else now
        aborted = 0
        for md in self._served():
            if md.pending_transition:
                continue
            if md.state in PREPARED:
                if md.transactional_id not in self._completing:
                    self.spawn(self._complete_in_background(md))
            elif md.state == TxnState.ONGOING and md.start_ms + md.timeout_ms < now:
                log.info("aborting the transaction of %s (producer id %d, epoch %d): open "
                         "for %d ms, its timeout is %d ms", md.transactional_id,
                         md.producer_id, md.producer_epoch, now - md.start_ms, md.timeout_ms)
                code = await self._fence_and_abort(md)
                if code == ErrorCode.none:
                    aborted += 1
                else:
                    log.warning("aborting %s failed: %s", md.transactional_id, code.name)
        return aborted

    async def expire_transactional_ids(self, now: int | None = None) -> int:
        """Forget ids idle for `transactional.id.expiration.ms` (a tombstone in the log)."""
        now = self.clock() if now is None else now
        expired = 0
        for md in self._served():
            if (md.pending_transition or md.state not in EXPIRABLE
                    or md.last_update_ms + self.config.id_expiration_ms > now):
                continue
            if await self._write(md, md.prepare_dead()) == ErrorCode.none:
                shard = self.runtime.active(self.partition_for(md.transactional_id))
                if shard is not None and shard.txns.get(md.transactional_id) is md:
                    del shard.txns[md.transactional_id]
                expired += 1
                log.info("transactional id %s expired", md.transactional_id)
        return expired

    # ---- describing -------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        if not transactional_id:
            return ErrorCode.invalid_request, None
        try:
            md = self._get(transactional_id)
        except KafkaError as e:
            return e.code, None
        if md is None or md.state == TxnState.DEAD:
            return ErrorCode.transactional_id_not_found, None
        return ErrorCode.none, md

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          min_duration_ms: int = -1, pattern: str | None = None
                          ) -> tuple[ErrorCode, list[str], list[TransactionMetadata]]:
        """(error, unknown state names, the matching ids) — ListTransactions."""
        if self.loading:
            return ErrorCode.coordinator_load_in_progress, [], []
        wanted: set[TxnState] = set()
        unknown: list[str] = []
        for name in states:
            state = TxnState.from_kafka_name(name)
            if state is None:
                unknown.append(name)
            else:
                wanted.add(state)
        if unknown and not wanted:
            return ErrorCode.none, unknown, []  # nothing can match an unknown state
        pids = set(producer_ids)
        try:
            regex = re.compile(pattern) if pattern else None
        except re.error:
            return ErrorCode.invalid_request, unknown, []
        now = self.clock()
        out = []
        for md in self._served():
            if md.state == TxnState.DEAD:
                continue
            if wanted and md.state not in wanted:
                continue
            if pids and md.producer_id not in pids:
                continue
            if min_duration_ms >= 0 and (md.state != TxnState.ONGOING
                                         or now - md.start_ms < min_duration_ms):
                continue
            if regex is not None and not regex.fullmatch(md.transactional_id):
                continue
            out.append(md)
        return ErrorCode.none, unknown, sorted(out, key=lambda m: m.transactional_id)

