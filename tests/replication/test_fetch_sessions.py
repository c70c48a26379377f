"""Incremental fetch sessions between brokers (KIP-227) on in-process replicas: the
leader answers a session's fetch with only what changed, wakes it on new data, and
refuses stale sessions with Kafka's error codes."""

from __future__ import annotations

import asyncio
import datetime
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import request_class
from odradek.protocol.records import NewRecord, encode_batch
from odradek.replication.channel import BrokerChannel
from odradek.replication.partition import now_ms
from odradek.replication.settings import ReplicaSettings
from tests.replication.inproc import FAST, Cluster, produce, until
from tests.replication.test_replication_inproc import run

FETCH = request_class(1, 11)
M = sys.modules[FETCH.__module__]


def batch(value: str) -> bytes:
    return encode_batch([NewRecord(value=value.encode())])


async def fetch(channel: BrokerChannel, replica_id: int, session_id: int, epoch: int,
                partitions: dict[tuple[str, int], int], max_wait_ms: int = 0,
                forgotten: dict[str, list[int]] | None = None, leader_epoch: int = 0,
                partition_max_bytes: int = 1 << 20, max_bytes: int = 10 << 20) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), offset in partitions.items():
        by_topic.setdefault(topic, []).append(M.FetchPartition(
            partition=index, current_leader_epoch=leader_epoch, fetch_offset=offset,
            log_start_offset=0, partition_max_bytes=partition_max_bytes))
    body = M.FetchRequest(
        replica_id=replica_id, max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1, max_bytes=max_bytes, isolation_level=0, session_id=session_id,
        session_epoch=epoch,
        topics=tuple(M.FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
        forgotten_topics_data=tuple(M.ForgottenTopic(topic=t, partitions=tuple(ps))
                                    for t, ps in (forgotten or {}).items()),
        rack_id="")
    return await channel.call(1, 11, body, extra_wait_s=max_wait_ms / 1000)


def answered(response: Any) -> dict[tuple[str, int], Any]:
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


def test_a_session_answers_only_what_changed_and_wakes_on_new_data(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        # replica 9 is ours to play: an assigned follower no broker runs
        c.create_topic("idle", (1, 9), partitions=200)
        leader = c.nodes[1]
        channel = BrokerChannel("127.0.0.1", leader.port, "fake-follower", 30)
        try:
            everything = {("idle", i): 0 for i in range(200)}
            first = await fetch(channel, 9, 0, 0, everything)
            assert first.error_code == ErrorCode.none and first.session_id != 0
            assert len(answered(first)) == 200  # the full fetch answers in full
            sid = first.session_id

            # an incremental fetch that names nothing waits, and is answered the moment
            # one partition gets data, with that partition alone
            waiting = asyncio.ensure_future(fetch(channel, 9, sid, 1, {}, max_wait_ms=60_000))
            await until(lambda: leader.replicas.fetch_sessions.get(sid).waiter is not None,
                        what="the session's fetch waits at the leader")
            code, _ = await produce(leader, "idle", batch("hello"), acks=1, index=7)
            assert code == ErrorCode.none
            second = await asyncio.wait_for(waiting, 20)  # not the 60 s max wait
            got = answered(second)
            assert list(got) == [("idle", 7)] and got[("idle", 7)].records
            assert second.session_id == sid

            # naming partition 7 at its new offset moves the high watermark (replica 9
            # is in the ISR); the answer carries that change and nothing else
            third = await fetch(channel, 9, sid, 2, {("idle", 7): 1})
            got = answered(third)
            assert list(got) == [("idle", 7)] and got[("idle", 7)].high_watermark == 1
            assert not got[("idle", 7)].records
            # nothing changed since: an empty answer
            assert answered(await fetch(channel, 9, sid, 3, {})) == {}

            # a stale epoch and an unknown session: Kafka's errors, nothing served
            stale = await fetch(channel, 9, sid, 2, {})
            assert stale.error_code == ErrorCode.invalid_fetch_session_epoch
            unknown = await fetch(channel, 9, sid + 1, 1, {})
            assert unknown.error_code == ErrorCode.fetch_session_id_not_found
            # the session is still good at its expected epoch
            assert (await fetch(channel, 9, sid, 4, {})).error_code == ErrorCode.none

            # fetching past the leader's end: OFFSET_OUT_OF_RANGE, the log untouched
            past = answered(await fetch(channel, 9, sid, 5, {("idle", 3): 50}))
            assert past[("idle", 3)].error_code == ErrorCode.offset_out_of_range
            assert leader.partition("idle", 7).log.log_end_offset == 1

            # a forgotten partition is no longer answered for
            await fetch(channel, 9, sid, 6, {}, forgotten={"idle": [7]})
            await produce(leader, "idle", batch("again"), acks=1, index=7)
            assert ("idle", 7) not in answered(await fetch(channel, 9, sid, 7, {}))
        finally:
            channel.close()

    run(tmp_path, 2, scenario)


def test_a_broker_that_is_not_a_replica_reads_nothing(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        c.create_topic("t", (1, 2))
        leader = c.nodes[1]
        code, _ = await produce(leader, "t", batch("only for replicas"), acks=1)
        assert code == ErrorCode.none
        channel = BrokerChannel("127.0.0.1", leader.port, "stranger", 30)
        try:
            for session_epoch in (-1, 0):  # sessionless, then in a session
                r = answered(await fetch(channel, 5, 0, session_epoch, {("t", 0): 0}))[("t", 0)]
                assert r.error_code == ErrorCode.none and not r.records
            assert 5 not in leader.partition("t").followers
        finally:
            channel.close()
        await until(lambda: c.nodes[2].partition("t").log.log_end_offset == 1,
                    what="the real follower still replicates")

    run(tmp_path, 2, scenario)


def test_followers_of_idle_partitions_stay_in_the_isr_fetching_incrementally(
        tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        c.create_topic("idle", (1, 2, 3), partitions=300)
        leader = c.nodes[1]
        for i in (0, 150, 299):
            code, _ = await produce(leader, "idle", batch(f"v{i}"), acks=-1, index=i)
            assert code == ErrorCode.none
        sessions = leader.replicas.fetch_sessions
        await until(lambda: len(sessions) == 2, what="one session per follower")
        lag = c.settings.lag_time_max_ms
        started = now_ms()
        await until(lambda: now_ms() - started > lag
                    and all(now_ms() - leader.replicas.session_fetch_ms.get(r, 0) < lag
                            for r in (2, 3)),
                    timeout=30, what="a lag time of incremental fetches")
        leader.replicas.shrink_isrs()
        assert c.isr_writes == []  # nobody dropped: they fetch every partition each time
        for i in (0, 150, 299):
            assert c.nodes[2].partition("idle", i).log.log_end_offset == 1
            assert c.nodes[3].partition("idle", i).log.log_end_offset == 1

    # a lag time a loaded machine's slowest fetch of 300 partitions stays well inside
    run(tmp_path, 3, scenario, replace(FAST, lag_time_max_ms=4000))


def test_a_small_response_budget_still_replicates_every_partition(tmp_path: Path) -> None:
    """replica.fetch.response.max.bytes smaller than one batch: each answer carries one
    partition, and the others stay pending in the session until their turn."""
    async def scenario(c: Cluster) -> None:
        c.create_topic("t", (1, 2), partitions=6)
        leader = c.nodes[1]
        for round_ in range(3):
            for i in range(6):
                code, _ = await produce(leader, "t", batch(f"{round_}-{i}" * 20), acks=1,
                                        index=i)
                assert code == ErrorCode.none
        await until(lambda: all(c.nodes[2].partition("t", i).log.log_end_offset == 3
                                for i in range(6)), what="every partition replicated")
        code, _ = await produce(leader, "t", batch("last"), acks=-1, index=5)
        assert code == ErrorCode.none

    tiny = ReplicaSettings(lag_time_max_ms=30_000, fetch_wait_max_ms=200, fetch_backoff_ms=100,
                           fetch_response_max_bytes=100, fetch_max_bytes=100)
    run(tmp_path, 2, scenario, settings=tiny)


def test_acks_all_produces_on_one_connection_are_appended_while_earlier_ones_wait(
        tmp_path: Path) -> None:
    """The connection takes the next Produce while an acks=all one waits for the ISR
    (its records are in the log already); the answers still come in request order."""
    from odradek.protocol.client_framing import ClientFraming, decode_response, frame_size

    async def scenario(c: Cluster) -> None:
        c.create_topic("t", (1, 2))
        leader = c.nodes[1]
        await c.kill(2)  # still in the ISR for the lag time: acks=all waits
        module = sys.modules[request_class(0, 9).__module__]
        framing = ClientFraming("pipelined")
        reader, writer = await asyncio.open_connection("127.0.0.1", leader.port)
        try:
            ids = []
            for i in range(3):
                body = module.ProduceRequest(
                    transactional_id=None, acks=-1,
                    timeout=datetime.timedelta(milliseconds=30_000),
                    topic_data=(module.TopicProduceData(name="t", partition_data=(
                        module.PartitionProduceData(index=0, records=batch(f"v{i}")),)),))
                cid, frame = framing.request(0, 9, body)
                ids.append(cid)
                writer.write(frame)
            # all three are in the log while the first still waits for the follower
            await until(lambda: leader.partition("t").log.log_end_offset == 3, timeout=5,
                        what="the three produces appended")
            await c.restart(2)  # the follower comes back and catches up: all complete
            answers = []
            for cid in ids:
                size = frame_size(await reader.readexactly(4))
                r = decode_response(0, 9, await reader.readexactly(size), cid)  # in order
                answers.append(r.responses[0].partition_responses[0])
            assert [a.base_offset for a in answers] == [0, 1, 2]
            assert {a.error_code for a in answers} == {ErrorCode.none}
        finally:
            writer.close()

    slow = ReplicaSettings(lag_time_max_ms=30_000, fetch_wait_max_ms=200, fetch_backoff_ms=100)
    run(tmp_path, 2, scenario, settings=slow)


def test_partitions_sharing_a_fetch_take_turns_when_each_batch_exceeds_the_limits(
        tmp_path: Path) -> None:
    """A follower whose replica.fetch.max.bytes and replica.fetch.response.max.bytes are
    below a batch gets one batch per fetch (KIP-74), and the partitions of its session
    take turns (KIP-227): out of the ISR, where its fetches do not move the high
    watermark, it catches up a backlog on every partition and rejoins the ISR. (The
    leader used to drop a partition the budget had left out until it was appended to
    again: the follower stalled after the first batch.)"""
    limit = 1024
    settings = replace(FAST, fetch_max_bytes=limit, fetch_response_max_bytes=limit)
    partitions = 3

    async def scenario(c: Cluster) -> None:
        c.create_topic("big", (1, 2), partitions=partitions)
        leader = c.nodes[1]
        await c.kill(2)
        for i in range(partitions):
            c.set_state("big", i, isr=(1,))
        for n in range(12):  # 12 batches of 8 records of 512 bytes each, per partition
            for i in range(partitions):
                records = encode_batch([NewRecord(value=bytes([n]) * 512) for _ in range(8)])
                assert len(records) > 4 * limit
                code, _ = await produce(leader, "big", records, acks=1, index=i)
                assert code == ErrorCode.none
        follower = await c.restart(2)
        ends = [leader.partition("big", i).log.log_end_offset for i in range(partitions)]
        assert ends == [96] * partitions
        await until(lambda: [follower.partition("big", i).log.log_end_offset
                             for i in range(partitions)] == ends,
                    what="the follower's log ends at the leader's")
        await until(lambda: all(c.state("big", i).isr == (1, 2) for i in range(partitions)),
                    what="the follower back in every ISR")

    run(tmp_path, 2, scenario, settings)


def test_a_session_serves_its_partitions_in_turn_one_batch_per_fetch(tmp_path: Path) -> None:
    """Limits below every batch: each answer carries the first batch of the first
    partition with data (KIP-74), and the session's order puts a partition that
    returned records last (KIP-227), so three partitions with a backlog are served
    round-robin until all are read; none waits for an append to be looked at again."""
    async def scenario(c: Cluster) -> None:
        c.create_topic("rr", (1, 9), partitions=3)  # 9: an assigned follower we play
        leader = c.nodes[1]
        for n in range(3):
            for i in range(3):
                code, _ = await produce(leader, "rr", batch(f"{n}-{i}-" + "x" * 300),
                                        acks=1, index=i)
                assert code == ErrorCode.none
        channel = BrokerChannel("127.0.0.1", leader.port, "fake-follower", 30)
        limits = {"partition_max_bytes": 100, "max_bytes": 100}
        try:
            offsets = {("rr", i): 0 for i in range(3)}
            served: list[int] = []
            r = await fetch(channel, 9, 0, 0, offsets, **limits)
            sid, epoch = r.session_id, 1
            while True:
                with_records = {k: p for k, p in answered(r).items() if p.records}
                assert len(with_records) <= 1  # the budget is spent by the first batch
                if not with_records:
                    break
                (key, _), = with_records.items()
                served.append(key[1])
                offsets[key] += 1
                r = await fetch(channel, 9, sid, epoch, {key: offsets[key]}, **limits)
                assert r.error_code == ErrorCode.none
                epoch += 1
            assert served == [0, 1, 2] * 3
            assert offsets == {("rr", i): 3 for i in range(3)}
        finally:
            channel.close()

    run(tmp_path, 1, scenario)


def test_an_answer_about_an_older_leader_epoch_does_not_back_the_follower_off(
        tmp_path: Path, caplog: Any) -> None:
    """The controller bumps a partition's leader epoch (a replica went offline) while a
    follower's fetch waits at the leader: the answer says fenced_leader_epoch about the
    epoch the follower has already left. That is no error of the new epoch's; backing
    off for it (replica.fetch.backoff.ms) stalled acks=all for as long."""
    async def scenario(c: Cluster) -> None:
        c.create_topic("t", (1, 2, 3))
        leader = c.nodes[1]
        assert (await produce(leader, "t", batch("before"), acks=-1))[0] == ErrorCode.none
        await until(lambda: len(leader.replicas.fetch_sessions) == 2,
                    what="a session per follower")
        c.elect("t", leader=1)  # same leader, next epoch, as after a replica left
        code, _ = await produce(leader, "t", batch("after"), acks=-1, timeout_ms=5000)
        assert code == ErrorCode.none
        for follower in (2, 3):
            assert c.nodes[follower].partition("t").log.log_end_offset == 2

    # a backoff longer than the produce may wait: one taken for the stale answer fails it
    with caplog.at_level("INFO", logger="odradek.replication.fetcher"):
        run(tmp_path, 3, scenario, replace(FAST, fetch_backoff_ms=10_000,
                                           lag_time_max_ms=60_000, socket_timeout_ms=20_000))
    assert "fenced_leader_epoch" not in caplog.text
