"""The transaction APIs byte for byte: bad input, old versions, what Fetch returns."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest

from odradek.client.transactions import describe_transactions
from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, decode_batches, encode_batch
from tests.conftest import BrokerProcess
from tests.transactions.helpers import create_topic, end_offsets, unique
from tests.wire import WireClient

PRODUCE, FETCH, OFFSET_FETCH, FIND_COORDINATOR, API_VERSIONS, INIT_PID = 0, 1, 9, 10, 18, 22
ADD_PARTITIONS, ADD_OFFSETS, END_TXN, WRITE_MARKERS, TXN_OFFSET_COMMIT = 24, 25, 26, 27, 28
DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS = 61, 65, 66
OFFSETS = "__consumer_offsets"


def init(c: WireClient, tid: str, timeout_ms: int = 60000, version: int = 4,
         expected: tuple[int, int] = (-1, -1)) -> tuple[ErrorCode, int, int]:
    deadline = time.monotonic() + 10
    while True:
        r = c.call(INIT_PID, version, transactional_id=tid,
                   transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
                   producer_id=expected[0], producer_epoch=expected[1])
        code = ErrorCode(r.error_code)
        # the first request for an id finds its __transaction_state partition loading
        if code not in (ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator) \
                or time.monotonic() > deadline:
            return code, r.producer_id, r.producer_epoch
        time.sleep(0.05)


def find_txn_coordinator(c: WireClient, tid: str) -> Any:
    return c.call(FIND_COORDINATOR, 3, key=tid, key_type=1)


def add_partitions(c: WireClient, tid: str, pid: int, epoch: int,
                   partitions: list[tuple[str, int]], version: int = 3) -> dict[Any, ErrorCode]:
    s = c.schema(ADD_PARTITIONS, version)
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    r = c.call(ADD_PARTITIONS, version, v3_and_below_transactional_id=tid,
               v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
               v3_and_below_topics=tuple(s.AddPartitionsToTxnTopic(name=t, partitions=tuple(ps))
                                         for t, ps in by_topic.items()))
    return {(t.name, p.partition_index): ErrorCode(p.partition_error_code)
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def end_txn(c: WireClient, tid: str, pid: int, epoch: int, commit: bool,
            version: int = 3) -> ErrorCode:
    r = c.call(END_TXN, version, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
               committed=commit)
    return ErrorCode(r.error_code)


def produce(c: WireClient, topic: str, records: bytes, tid: str | None,
            partition: int = 0) -> tuple[ErrorCode, int]:
    s = c.schema(PRODUCE, 9)
    r = c.call(PRODUCE, 9, transactional_id=tid, acks=-1, timeout=datetime.timedelta(seconds=5),
               topic_data=(s.TopicProduceData(name=topic, partition_data=(
                   s.PartitionProduceData(index=partition, records=records),)),))
    p = r.responses[0].partition_responses[0]
    return ErrorCode(p.error_code), p.base_offset


def txn_batch(pid: int, epoch: int, seq: int, *values: str) -> bytes:
    return encode_batch([NewRecord(value=v.encode()) for v in values], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, transactional=True)


def fetch(c: WireClient, topic: str, isolation: int, version: int = 12) -> Any:
    s = c.schema(FETCH, version)
    kwargs: dict[str, Any] = dict(
        replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
        isolation_level=isolation,
        topics=(s.FetchTopic(topic=topic, partitions=(s.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20),)),))
    if version >= 7:
        kwargs.update(session_id=0, session_epoch=-1, forgotten_topics_data=())
    if version >= 11:
        kwargs["rack_id"] = ""
    return c.call(FETCH, version, **kwargs).responses[0].partitions[0]


@pytest.fixture
def wire(txn_broker: BrokerProcess) -> Any:
    with WireClient(txn_broker.bootstrap) as c:
        yield c


def test_the_transaction_apis_are_advertised(wire: WireClient) -> None:
    keys = {k.api_key: (k.min_version, k.max_version)
            for k in wire.call(API_VERSIONS, 3, client_software_name="t",
                               client_software_version="1").api_keys}
    assert keys[ADD_PARTITIONS] == (0, 5) and keys[ADD_OFFSETS] == (0, 4)
    assert keys[END_TXN] == (0, 5) and keys[TXN_OFFSET_COMMIT] == (0, 5)
    assert keys[WRITE_MARKERS] == (1, 2) and keys[DESCRIBE_PRODUCERS] == (0, 0)
    assert keys[DESCRIBE_TXNS] == (0, 0) and keys[LIST_TXNS] == (0, 2)


def test_bad_input_gets_kafkas_error_codes(txn_broker: BrokerProcess, wire: WireClient) -> None:
    topic = create_topic(txn_broker.bootstrap, unique("bad"))
    tid = unique("tx")
    assert find_txn_coordinator(wire, tid).error_code == ErrorCode.none
    assert find_txn_coordinator(wire, "").error_code == ErrorCode.invalid_request
    assert init(wire, tid, timeout_ms=120_001)[0] == ErrorCode.invalid_transaction_timeout
    assert init(wire, tid, expected=(5, -1))[0] == ErrorCode.invalid_request
    code, pid, epoch = init(wire, tid)
    assert code == ErrorCode.none
    # an unknown topic: that partition fails, the others are not attempted
    assert add_partitions(wire, tid, pid, epoch, [(topic, 0), ("no-such-topic", 0)]) == {
        (topic, 0): ErrorCode.operation_not_attempted,
        ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition}
    assert add_partitions(wire, unique("unknown"), pid, epoch, [(topic, 0)]) == {
        (topic, 0): ErrorCode.invalid_producer_id_mapping}
    # EndTxn with no transaction, with a wrong producer id
    assert end_txn(wire, tid, pid, epoch, commit=True) == ErrorCode.invalid_txn_state
    assert end_txn(wire, tid, pid + 1, epoch, commit=True) == ErrorCode.invalid_producer_id_mapping
    # transactional records for a partition not in the transaction, or with no id
    assert produce(wire, topic, txn_batch(pid, epoch, 0, "x"), tid)[0] == \
        ErrorCode.invalid_txn_state
    assert produce(wire, topic, txn_batch(pid, epoch, 0, "x"), None)[0] == \
        ErrorCode.invalid_txn_state
    assert end_offsets(txn_broker.bootstrap, topic) == (0, 0)  # nothing was written
    # offsets for a group the producer did not add
    s = wire.schema(TXN_OFFSET_COMMIT, 3)
    r = wire.call(TXN_OFFSET_COMMIT, 3, transactional_id=tid, group_id=unique("g"),
                  producer_id=pid, producer_epoch=epoch, generation_id=-1, member_id="",
                  group_instance_id=None, topics=(s.TxnOffsetCommitRequestTopic(
                      name=topic, partitions=(s.TxnOffsetCommitRequestPartition(
                          partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                          committed_metadata=""),)),))
    assert r.topics[0].partitions[0].error_code == ErrorCode.invalid_txn_state


def test_a_zombie_is_fenced_with_the_error_its_version_knows(
        txn_broker: BrokerProcess, wire: WireClient) -> None:
    topic = create_topic(txn_broker.bootstrap, unique("zombie"))
    tid = unique("tx")
    find_txn_coordinator(wire, tid)  # creates __transaction_state when run alone
    _, pid, old = init(wire, tid)
    assert add_partitions(wire, tid, pid, old, [(topic, 0)]) == {(topic, 0): ErrorCode.none}
    assert produce(wire, topic, txn_batch(pid, old, 0, "a"), tid) == (ErrorCode.none, 0)
    code, pid2, new = init(wire, tid)  # another instance: fences and aborts the first
    # the fence (+1), its abort at the cluster's transaction version 2 (+1), the new
    # instance's epoch (+1): as Kafka 4 counts them
    assert (code, pid2, new) == (ErrorCode.none, pid, old + 3)
    # the zombie keeps writing, to the partition it added and to a new one
    assert produce(wire, topic, txn_batch(pid, old, 1, "b"), tid)[0] == \
        ErrorCode.invalid_producer_epoch
    assert add_partitions(wire, tid, pid, old, [(topic, 0)], version=1) == {
        (topic, 0): ErrorCode.invalid_producer_epoch}
    assert add_partitions(wire, tid, pid, old, [(topic, 0)], version=2) == {
        (topic, 0): ErrorCode.producer_fenced}
    assert end_txn(wire, tid, pid, old, commit=True, version=1) == ErrorCode.invalid_producer_epoch
    assert end_txn(wire, tid, pid, old, commit=True, version=2) == ErrorCode.producer_fenced
    assert init(wire, tid, version=3, expected=(pid, old))[0] == ErrorCode.invalid_producer_epoch
    assert init(wire, tid, version=4, expected=(pid, old))[0] == ErrorCode.producer_fenced
    # the abort marker carries the fencing epoch into the partition
    producers = describe_producers(wire, topic)
    assert [(p.producer_id, p.producer_epoch, p.current_txn_start_offset)
            for p in producers] == [(pid, old + 2, -1)]


def describe_producers(c: WireClient, topic: str) -> Any:
    s = c.schema(DESCRIBE_PRODUCERS, 0)
    r = c.call(DESCRIBE_PRODUCERS, 0, topics=(s.TopicRequest(name=topic, partition_indexes=(0,)),))
    assert r.topics[0].partitions[0].error_code == ErrorCode.none
    return r.topics[0].partitions[0].active_producers


def test_fetch_returns_aborted_transactions_to_read_committed_only(
        txn_broker: BrokerProcess, wire: WireClient) -> None:
    topic = create_topic(txn_broker.bootstrap, unique("fetch"))
    tid = unique("tx")
    _, pid, epoch = init(wire, tid)
    add_partitions(wire, tid, pid, epoch, [(topic, 0)])
    produce(wire, topic, txn_batch(pid, epoch, 0, "a1", "a2"), tid)
    assert end_txn(wire, tid, pid, epoch, commit=False) == ErrorCode.none
    add_partitions(wire, tid, pid, epoch, [(topic, 0)])
    produce(wire, topic, txn_batch(pid, epoch, 2, "c1"), tid)
    for version in (4, 11, 12):  # by topic name (v13+, by id, is what librdkafka uses)
        committed = fetch(wire, topic, isolation=1, version=version)
        assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [
            (pid, 0)]
        assert (committed.high_watermark, committed.last_stable_offset) == (4, 3)
        batches = list(decode_batches(committed.records))
        assert [b.base_offset for b in batches] == [0, 2]  # data and the ABORT marker
        assert batches[1].is_control
        uncommitted = fetch(wire, topic, isolation=0, version=version)
        assert uncommitted.aborted_transactions is None
        assert len(list(decode_batches(uncommitted.records))) == 3
    assert end_txn(wire, tid, pid, epoch, commit=True) == ErrorCode.none
    empty = fetch(wire, create_topic(txn_broker.bootstrap, unique("empty")), isolation=1)
    assert empty.aborted_transactions == ()  # an empty list, not null


def test_offsets_of_an_open_transaction_are_unstable(
        txn_broker: BrokerProcess, wire: WireClient) -> None:
    topic = create_topic(txn_broker.bootstrap, unique("unstable"))
    group, tid = unique("g"), unique("tx")
    assert wire.call(FIND_COORDINATOR, 3, key=group, key_type=0).error_code == ErrorCode.none
    _, pid, epoch = init(wire, tid)
    r = wire.call(ADD_OFFSETS, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                  group_id=group)
    assert r.error_code == ErrorCode.none
    s = wire.schema(TXN_OFFSET_COMMIT, 3)

    def commit(offset: int) -> ErrorCode:
        deadline = time.monotonic() + 10
        while True:
            r = wire.call(TXN_OFFSET_COMMIT, 3, transactional_id=tid, group_id=group,
                          producer_id=pid, producer_epoch=epoch, generation_id=-1, member_id="",
                          group_instance_id=None, topics=(s.TxnOffsetCommitRequestTopic(
                              name=topic, partitions=(s.TxnOffsetCommitRequestPartition(
                                  partition_index=0, committed_offset=offset,
                                  committed_leader_epoch=-1, committed_metadata="m"),)),))
            code = ErrorCode(r.topics[0].partitions[0].error_code)
            if code != ErrorCode.coordinator_load_in_progress or time.monotonic() > deadline:
                return code
            time.sleep(0.05)

    def fetched(require_stable: bool) -> tuple[int, ErrorCode]:
        f = wire.schema(OFFSET_FETCH, 7)
        r = wire.call(OFFSET_FETCH, 7, group_id=group, require_stable=require_stable,
                      topics=(f.OffsetFetchRequestTopic(name=topic, partition_indexes=(0,)),))
        p = r.topics[0].partitions[0]
        return p.committed_offset, ErrorCode(p.error_code)

    assert commit(7) == ErrorCode.none
    assert fetched(require_stable=True) == (-1, ErrorCode.unstable_offset_commit)
    assert fetched(require_stable=False) == (-1, ErrorCode.none)
    assert end_txn(wire, tid, pid, epoch, commit=True) == ErrorCode.none
    assert fetched(require_stable=True) == (7, ErrorCode.none)
    wire.call(ADD_OFFSETS, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
              group_id=group)
    assert commit(9) == ErrorCode.none
    assert end_txn(wire, tid, pid, epoch, commit=False) == ErrorCode.none
    assert fetched(require_stable=True) == (7, ErrorCode.none)


def test_describe_and_list_transactions(txn_broker: BrokerProcess, wire: WireClient) -> None:
    topic = create_topic(txn_broker.bootstrap, unique("desc"), partitions=2)
    tid = unique("tx")
    _, pid, epoch = init(wire, tid, timeout_ms=45000)
    add_partitions(wire, tid, pid, epoch, [(topic, 1), (topic, 0)])
    address = ("127.0.0.1", txn_broker.port)
    state, missing = describe_transactions(address, (tid, "nope"))
    assert (state.error_code, state.transaction_state, state.producer_id, state.producer_epoch,
            state.timeout_ms, state.partitions) == (
        ErrorCode.none, "Ongoing", pid, epoch, 45000, ((topic, 0), (topic, 1)))
    assert abs(state.start_ms - time.time() * 1000) < 60_000
    assert missing.error_code == ErrorCode.transactional_id_not_found
    r = wire.call(LIST_TXNS, 2, state_filters=("Ongoing", "Bogus"), producer_id_filters=(pid,),
                  duration_filter=-1, transactional_id_pattern=None)
    assert r.unknown_state_filters == ("Bogus",)
    assert [(t.transactional_id, t.transaction_state) for t in r.transaction_states] == [
        (tid, "Ongoing")]
    assert end_txn(wire, tid, pid, epoch, commit=False) == ErrorCode.none
    r = wire.call(LIST_TXNS, 0, state_filters=(), producer_id_filters=(pid,))
    assert [t.transaction_state for t in r.transaction_states] == ["CompleteAbort"]
    done = describe_transactions(address, (tid,))[0]
    assert (done.transaction_state, done.partitions) == ("CompleteAbort", ())


def test_write_txn_markers_ends_a_transaction_in_a_partition(
        txn_broker: BrokerProcess, wire: WireClient) -> None:
    topic = create_topic(txn_broker.bootstrap, unique("marker"))
    tid = unique("tx")
    _, pid, epoch = init(wire, tid)
    add_partitions(wire, tid, pid, epoch, [(topic, 0)])
    produce(wire, topic, txn_batch(pid, epoch, 0, "x"), tid)
    assert end_offsets(txn_broker.bootstrap, topic) == (0, 1)
    s = wire.schema(WRITE_MARKERS, 1)
    r = wire.call(WRITE_MARKERS, 1, markers=(s.WritableTxnMarker(
        producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
        topics=(s.WritableTxnMarkerTopic(name=topic, partition_indexes=(0,)),)),))
    assert r.markers[0].topics[0].partitions[0].error_code == ErrorCode.none
    assert end_offsets(txn_broker.bootstrap, topic) == (2, 2)
    # the coordinator still thinks the transaction is open; ending it is harmless
    assert end_txn(wire, tid, pid, epoch, commit=False) == ErrorCode.none
