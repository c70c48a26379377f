"""Produce (0): append record batches to partition leaders.

acks=0 gets no response at all; acks=1 is answered once the batches are in the
leader's log; acks=all once the high watermark passes them, i.e. every in-sync replica
has them (at once when the ISR is only this broker). acks=all is refused with
NOT_ENOUGH_REPLICAS, before appending, while the ISR is smaller than
min.insync.replicas, and answered NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank
below while the request waited; REQUEST_TIMED_OUT after the request's timeout. Each
partition fails alone: a bad batch in one partition does not stop the others.

v12 is transaction version 2 (KIP-890 part 2): its producer sends no
AddPartitionsToTxn, so the transactional partitions of the request are added to the
producer's transaction first (server/txn_partition_adder.py), and a partition that
could not be added fails with the coordinator's error, as Kafka's ReplicaManager
answers it. Before v12 (KIP-890 part 1), a transaction's first batch to a partition
whose producer's coordinator is another broker is verified with that coordinator
(AddPartitionsToTxn v5 `verify_only`); where this broker coordinates the id, the check
is local (`_check_transactional`).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from dataclasses import replace
from typing import Any

from odradek.protocol.batch import ATTR_TRANSACTIONAL, ATTRIBUTES_OFFSET, read_header
from odradek.protocol.errors import (
    CorruptMessage,
    ErrorCode,
    InvalidRequiredAcks,
    KafkaError,
    RecordValidation,
)
from odradek.protocol.produce_request import decode_produce_request
from odradek.replication.delayed_produce import DelayedProduce
from odradek.replication.partition import Partition
from odradek.server.handlers.base import (
    CLOSE_CONNECTION,
    ApiHandler,
    AwaitingReplicas,
    RequestContext,
    build,
    timestamp_or_none,
)

API_KEY = 0
FIRST_IMPLICIT_ADD = 12
log = logging.getLogger(__name__)
# What a producer retries: a coordinator that could not be asked or was busy (Kafka
# picks NOT_ENOUGH_REPLICAS, which does not make the client refresh its metadata)
_ADD_RETRIABLE = frozenset({
    ErrorCode.concurrent_transactions, ErrorCode.network_exception,
    ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator})
_ATTRIBUTES_LOW = ATTRIBUTES_OFFSET + 1  # the attribute bits live in the int16's low byte


def _check_transactional(ctx: RequestContext, transactional_id: str | None, topic: str,
                         index: int, buf: Any) -> None:
    """A transactional batch is taken only into a partition its producer added to its
    ongoing transaction, at its current epoch (Kafka's produce-path verification)."""
    try:
        header = read_header(buf)
    except CorruptMessage:
        return  # the log's validation names the problem
    if not header.is_transactional:
        return
    code = ctx.transactions.verify_produce(
        transactional_id, header.producer_id, header.producer_epoch, (topic, index))
    if code != ErrorCode.none:
        raise KafkaError(f"transactional batch of producer {header.producer_id} epoch "
                         f"{header.producer_epoch}: {code.name}", code)


def _append(ctx: RequestContext, topic: str, index: int, records: Any,
            transactional_id: str | None = None, acks: int = 1,
            waits: list[tuple[Partition, int]] | None = None,
            flushes: dict[Future[None], list[tuple[str, int]]] | None = None,
            ) -> tuple[Any, ...]:
    """(error_code, base_offset, log_append_time, log_start_offset, message,
    record errors).

    An acks=all append the ISR does not have yet goes into `waits` as (partition,
    offset the high watermark must reach)."""
    try:
        partition = ctx.replicas.get_leader(topic, index)
        if acks == -1:
            partition.check_enough_replicas()
        if records is None or len(records) == 0:
            raise CorruptMessage("produce request without records")
        # the hand-written decoder hands out writable slices of the request frame
        writable = isinstance(records, bytearray) or (
            isinstance(records, memoryview) and not records.readonly)
        buf = records if writable else bytearray(records)
        # one byte of the first batch's attributes: nothing more on the common path
        if transactional_id is not None or (
                len(buf) > _ATTRIBUTES_LOW and buf[_ATTRIBUTES_LOW] & ATTR_TRANSACTIONAL):
            _check_transactional(ctx, transactional_id, topic, index, buf)
        info = partition.append(buf)
        ctx.metrics.on_produce(topic, len(buf), info.records_count)
        if acks == -1 and not partition.solo and waits is not None:
            waits.append((partition, info.last_offset + 1))
        pending = partition.log.pending_flush  # flush.messages reached: fsync first
        if pending is not None and flushes is not None:
            flushes.setdefault(pending, []).append((topic, index))
        return (ErrorCode.none, info.first_offset, info.log_append_time,
                info.log_start_offset, None, ())
    except KafkaError as e:
        if e.code != ErrorCode.unknown_topic_or_partition:
            log.warning("produce to %s-%d from %s rejected: %s (%s)", topic, index,
                        ctx.header.client_id, e, e.code.name)
        record_errors = e.record_errors if isinstance(e, RecordValidation) else ()
        return (e.code, -1, -1, -1, str(e), record_errors)


def _transactional_partitions(ctx: RequestContext, request: Any, first_only: bool
                              ) -> dict[tuple[int, int], list[tuple[str, int]]]:
    """The partitions of a request with transactional batches, led here, by the
    (producer id, epoch) of their first batch. `first_only`: only those where that
    producer epoch has no transaction open yet, whose coordinator is another broker
    (what Kafka verifies before version 2)."""
    out: dict[tuple[int, int], list[tuple[str, int]]] = {}
    coordinator = ctx.transactions.coordinator
    for topic_data in request.topic_data:
        for pdata in topic_data.partition_data:
            records = pdata.records
            if records is None or len(records) <= _ATTRIBUTES_LOW \
                    or not records[_ATTRIBUTES_LOW] & ATTR_TRANSACTIONAL:
                continue
            try:
                header = read_header(records)
                partition = ctx.replicas.get_leader(topic_data.name, pdata.index)
            except KafkaError:
                continue  # the append names the problem
            if first_only:
                entry = partition.log.producer_state.last_entry(header.producer_id)
                if entry is not None and entry.producer_epoch == header.producer_epoch \
                        and entry.current_txn_first_offset is not None:
                    continue  # its transaction's first batch here was verified
                if coordinator.verify(request.transactional_id, header.producer_id,
                                      header.producer_epoch, (topic_data.name, pdata.index)
                                      ) != ErrorCode.not_coordinator:
                    continue  # coordinated here: checked at the append
            out.setdefault((header.producer_id, header.producer_epoch), []).append(
                (topic_data.name, pdata.index))
    return out


async def _add_then_produce(ctx: RequestContext, request: Any,
                            wanted: dict[tuple[int, int], list[tuple[str, int]]],
                            verify_only: bool) -> Any:
    refused: dict[tuple[str, int], ErrorCode] = {}
    adder = ctx.transactions.adder
    for (pid, epoch), tps in wanted.items():
        if verify_only:
            added = await adder.verify(request.transactional_id, pid, epoch, tps)
        else:
            added = await adder.add(request.transactional_id, pid, epoch, tps)
        for tp, code in added.items():
            if code != ErrorCode.none:
                refused[tp] = ErrorCode.not_enough_replicas if code in _ADD_RETRIABLE else code
    reply = _produce(ctx, request, refused)
    while asyncio.iscoroutine(reply):
        reply = await reply
    return await reply.wait if isinstance(reply, AwaitingReplicas) else reply


def handle(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None and request.acks in (-1, 0, 1):
        verify_only = ctx.version < FIRST_IMPLICIT_ADD
        wanted = _transactional_partitions(ctx, request, first_only=verify_only)
        if wanted:
            return _add_then_produce(ctx, request, wanted, verify_only)
    return _produce(ctx, request, {})


def _produce(ctx: RequestContext, request: Any,
             refused: dict[tuple[str, int], ErrorCode]) -> Any:
    acks = request.acks
    schema = ctx.schema
    if acks not in (-1, 0, 1):
        error: KafkaError | None = InvalidRequiredAcks(f"acks={acks} is not one of -1, 0, 1")
    else:
        error = None
    responses = []
    waits: list[tuple[Partition, int]] = []
    flushes: dict[Future[None], list[tuple[str, int]]] = {}
    for topic_data in request.topic_data:
        partitions = []
        for pdata in topic_data.partition_data:
            bad: tuple[tuple[int, str], ...]
            tp = (topic_data.name, pdata.index)
            if error is not None:
                code, base, append_time, start, message, bad = (
                    error.code, -1, -1, -1, str(error), ())
            elif tp in refused:
                code, base, append_time, start, message, bad = (
                    refused[tp], -1, -1, -1,
                    "Unable to add the partition to the transaction: "
                    f"{refused[tp].name}", ())
            else:
                code, base, append_time, start, message, bad = _append(
                    ctx, topic_data.name, pdata.index, pdata.records, request.transactional_id,
                    acks, waits, flushes)
            partitions.append(
                build(
                    schema.PartitionProduceResponse,
                    index=pdata.index,
                    error_code=code,
                    base_offset=base,
                    log_append_time=timestamp_or_none(append_time),
                    log_start_offset=start,
                    record_errors=tuple(
                        build(schema.BatchIndexAndErrorMessage, batch_index=i,
                              batch_index_error_message=m) for i, m in bad),
                    error_message=message,
                )
            )
        responses.append(
            build(schema.TopicProduceResponse, name=topic_data.name,
                  partition_responses=tuple(partitions))
        )
    if acks == 0:
        # The producer reads no response; closing is how Kafka tells it something failed.
        failed = any(p.error_code != ErrorCode.none for t in responses
                     for p in t.partition_responses)
        return CLOSE_CONNECTION if failed else None
    if flushes:
        return _after_flush(ctx, request, responses, flushes, waits)
    return _acknowledge(schema, request, responses, waits)


def _acknowledge(schema: Any, request: Any, responses: list[Any],
                 waits: list[tuple[Partition, int]]) -> Any:
    if waits:
        delayed = DelayedProduce()
        waiting = {(p.topic, p.index) for p, required in waits
                   if p.wait_for_isr(required, delayed)}
        if waiting:
            return AwaitingReplicas(
                _after_isr(schema, responses, delayed, waiting, request.timeout_ms))
    return build(schema.ProduceResponse, responses=tuple(responses))


async def _after_flush(ctx: RequestContext, request: Any, responses: list[Any],
                       flushes: dict[Future[None], list[tuple[str, int]]],
                       waits: list[tuple[Partition, int]]) -> Any:
    """log.flush.interval.messages: acknowledged once the fsync is done (in the flusher
    thread); a partition whose flush failed answers KAFKA_STORAGE_ERROR."""
    failed: dict[tuple[str, int], str] = {}
    for future, tps in flushes.items():
        try:
            await asyncio.wrap_future(future)
        except (KafkaError, OSError) as exc:
            failed.update(dict.fromkeys(tps, str(exc)))
    if failed:
        responses = [
            replace(t, partition_responses=tuple(
                replace(p, error_code=ErrorCode.kafka_storage_error,
                        error_message=failed[(t.name, p.index)])
                if (t.name, p.index) in failed else p
                for p in t.partition_responses))
            for t in responses
        ]
    reply = _acknowledge(ctx.schema, request, responses, waits)
    # (already waiting for its flush: the connection holds this request's place anyway)
    return await reply.wait if isinstance(reply, AwaitingReplicas) else reply


async def _after_isr(schema: Any, responses: list[Any], delayed: DelayedProduce,
                     waiting: set[tuple[str, int]], timeout_ms: int) -> Any:
    """The acks=all answer once every waiting partition is replicated or timed out."""
    await delayed.wait(timeout_ms / 1000)
    out = []
    for t in responses:
        parts = []
        for p in t.partition_responses:
            tp = (t.name, p.index)
            if tp in waiting:
                code = delayed.timed_out(tp)
                if code != ErrorCode.none:
                    p = replace(p, error_code=code, error_message=code.name)
            parts.append(p)
        out.append(replace(t, partition_responses=tuple(parts)))
    return build(schema.ProduceResponse, responses=tuple(out))


HANDLER = ApiHandler(API_KEY, 3, 12, handle, decode=decode_produce_request)
