"""Leader and follower replicas end to end on one event loop (see inproc.py): real logs,
handlers, connections and fetchers; the metadata is played by the test."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from odradek.protocol.errors import ErrorCode
from odradek.protocol.records import NewRecord, decode_batches, encode_batch
from odradek.replication.settings import ReplicaSettings
from odradek.storage.log_config import LogConfig
from tests.replication.inproc import FAST, Cluster, produce, segment_bytes, until


def run(tmp_path: Path, n: int, scenario: Callable[[Cluster], Awaitable[Any]],
        settings: ReplicaSettings = FAST, log_config: LogConfig | None = None) -> Any:
    async def main() -> Any:
        cluster = await Cluster(tmp_path, n, settings, log_config).start()
        try:
            return await asyncio.wait_for(scenario(cluster), 60)
        finally:
            await cluster.stop()

    return asyncio.run(main())


def batch(*values: str, pid: int = -1, seq: int = -1) -> bytes:
    return encode_batch([NewRecord(value=v.encode()) for v in values], producer_id=pid,
                        producer_epoch=0 if pid >= 0 else -1, base_sequence=seq)


def values(node: Any, topic: str, upto: int | None = None) -> list[bytes]:
    lg = node.partition(topic).log
    data = lg.read(lg.log_start_offset, 1 << 30, max_offset=upto).records
    return [r.value for b in decode_batches(data) for r in b.records]


def test_acks_all_waits_for_every_in_sync_follower(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        c.create_topic("t", (1, 2, 3))
        leader = c.nodes[1]
        p = leader.partition("t")
        assert not p.solo and p.is_leader
        assert not c.nodes[2].partition("t").is_leader
        for i in range(20):
            code, base = await produce(leader, "t", batch(f"a{i}", f"b{i}"))
            assert (code, base) == (ErrorCode.none, 2 * i)
            # acknowledged means the whole ISR has it
            for f in (2, 3):
                assert c.nodes[f].partition("t").log.log_end_offset >= 2 * i + 2
        assert p.high_watermark == 40
        await until(lambda: all(c.nodes[i].partition("t").high_watermark == 40
                                for i in (2, 3)), what="followers learn the HW")
        assert segment_bytes(c.nodes[2], "t") == segment_bytes(leader, "t")
        assert segment_bytes(c.nodes[3], "t") == segment_bytes(leader, "t")
        assert c.isr_writes == []

    run(tmp_path, 3, scenario)


def test_acks_all_latency_against_acks_1(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> tuple[float, float]:
        c.create_topic("t", (1, 2, 3))
        leader = c.nodes[1]
        timings = {}
        for acks in (1, -1):
            await produce(leader, "t", batch("warm"), acks)
            started = time.perf_counter()
            for i in range(50):
                code, _ = await produce(leader, "t", batch(f"v{i}"), acks)
                assert code == ErrorCode.none
            timings[acks] = (time.perf_counter() - started) / 50
        print(f"acks=1 {timings[1] * 1000:.2f} ms, acks=all {timings[-1] * 1000:.2f} ms")
        # a follower waiting at the leader is woken by the append: two round trips
        assert timings[-1] < 0.05
        return timings[1], timings[-1]

    run(tmp_path, 3, scenario)


def test_consumer_fetch_reads_only_up_to_the_high_watermark(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        c.create_topic("t", (1, 2))
        await produce(c.nodes[1], "t", batch("x"))
        await c.kill(2)
        # acks=1 lands on the leader only: above the high watermark until 2 is back
        code, base = await produce(c.nodes[1], "t", batch("y"), acks=1)
        assert (code, base) == (ErrorCode.none, 1)
        p = c.nodes[1].partition("t")
        assert p.high_watermark == 1 and p.log.log_end_offset == 2
        assert values(c.nodes[1], "t", p.high_watermark) == [b"x"]

    run(tmp_path, 2, scenario)


def test_a_lagging_follower_leaves_the_isr_and_rejoins_after_restart(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        c.create_topic("t", (1, 2, 3))
        await produce(c.nodes[1], "t", batch("a"))
        started = time.monotonic()
        await c.kill(3)
        await until(lambda: c.state("t").isr == (1, 2), timeout=10, what="ISR shrinks")
        shrunk_after = time.monotonic() - started
        assert FAST.lag_time_max_ms / 1000 <= shrunk_after < 3 * FAST.lag_time_max_ms / 1000
        # without 3 the HW advances again: acks=all goes through
        code, _ = await produce(c.nodes[1], "t", batch("b"))
        assert code == ErrorCode.none
        await c.restart(3)
        await until(lambda: c.state("t").isr == (1, 2, 3), timeout=10, what="3 rejoins")
        assert values(c.nodes[3], "t") == [b"a", b"b"]

    run(tmp_path, 3, scenario)


def test_min_insync_replicas_refuses_acks_all_but_not_acks_1(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        c.create_topic("t", (1, 2, 3))
        await c.kill(2)
        await c.kill(3)
        await until(lambda: c.state("t").isr == (1,), timeout=10, what="ISR shrinks")
        code, _ = await produce(c.nodes[1], "t", batch("no"))
        assert code == ErrorCode.not_enough_replicas
        code, base = await produce(c.nodes[1], "t", batch("yes"), acks=1)
        assert (code, base) == (ErrorCode.none, 0)

    run(tmp_path, 3, scenario, log_config=LogConfig(min_insync_replicas=2))


def test_acks_all_times_out_when_a_follower_stalls_in_the_isr(tmp_path: Path) -> None:
    slow = ReplicaSettings(lag_time_max_ms=30_000, fetch_wait_max_ms=200, fetch_backoff_ms=100)

    async def scenario(c: Cluster) -> None:
        c.create_topic("t", (1, 2))
        await c.kill(2)
        code, _ = await produce(c.nodes[1], "t", batch("late"), timeout_ms=300)
        assert code == ErrorCode.request_timed_out

    run(tmp_path, 2, scenario, settings=slow)


def test_produce_and_fetch_to_a_follower_are_refused(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        c.create_topic("t", (1, 2))
        code, _ = await produce(c.nodes[2], "t", batch("x"))
        assert code == ErrorCode.not_leader_or_follower

    run(tmp_path, 2, scenario)


def test_divergent_tail_is_truncated_and_replicas_end_identical(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        c.create_topic("t", (1, 2, 3))
        for i in range(3):
            assert (await produce(c.nodes[1], "t", batch(f"c{i}")))[0] == ErrorCode.none
        # the old leader takes acks=1 writes nobody else gets, then dies
        await c.kill(2)
        await c.kill(3)
        for i in range(4):
            assert (await produce(c.nodes[1], "t", batch(f"lost{i}"), acks=1))[0] == 0
        await c.kill(1)
        await c.restart(2)
        await c.restart(3)
        c.elect("t", leader=2, isr=(2, 3))
        for i in range(2):
            assert (await produce(c.nodes[2], "t", batch(f"new{i}")))[0] == ErrorCode.none
        await c.restart(1)
        await until(lambda: c.state("t").isr == (2, 3, 1), timeout=10, what="1 rejoins")
        expected = [b"c0", b"c1", b"c2", b"new0", b"new1"]
        for i in (1, 2, 3):
            assert values(c.nodes[i], "t") == expected
        assert segment_bytes(c.nodes[1], "t") == segment_bytes(c.nodes[2], "t")
        assert segment_bytes(c.nodes[3], "t") == segment_bytes(c.nodes[2], "t")
        assert c.nodes[1].partition("t").log.leader_epochs.entries == \
            c.nodes[2].partition("t").log.leader_epochs.entries

    run(tmp_path, 3, scenario)


def test_leader_failover_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    async def scenario(c: Cluster) -> None:
        c.create_topic("t", (1, 2, 3))
        acked: list[str] = []
        for i in range(30):
            v = f"r{i}"
            if (await produce(c.nodes[1], "t", batch(v)))[0] == ErrorCode.none:
                acked.append(v)
        await c.kill(1, clean=False)
        started = time.monotonic()
        c.elect("t", leader=2, isr=(2, 3))
        for i in range(30, 40):
            v = f"r{i}"
            if (await produce(c.nodes[2], "t", batch(v)))[0] == ErrorCode.none:
                acked.append(v)
        assert time.monotonic() - started < 2
        got = [v.decode() for v in values(c.nodes[2], "t",
                                           c.nodes[2].partition("t").high_watermark)]
        assert got == acked

    run(tmp_path, 3, scenario)


def test_a_restarted_replica_exposes_only_its_checkpointed_high_watermark(
        tmp_path: Path) -> None:
    slow = ReplicaSettings(lag_time_max_ms=30_000, fetch_wait_max_ms=200, fetch_backoff_ms=100,
                           hw_checkpoint_interval_ms=100)

    async def scenario(c: Cluster) -> None:
        c.create_topic("t", (1, 2))
        for v in ("a", "b", "c"):
            assert (await produce(c.nodes[1], "t", batch(v)))[0] == ErrorCode.none
        await c.kill(2)
        for v in ("d", "e"):  # above the high watermark: 2 is still in the ISR
            assert (await produce(c.nodes[1], "t", batch(v), acks=1))[0] == ErrorCode.none
        await asyncio.sleep(0.4)  # a replication-offset-checkpoint is written
        await c.kill(1, clean=False)
        node = await c.restart(1)
        p = node.partition("t")
        assert p.log.log_end_offset == 5 and p.high_watermark == 3
        assert values(node, "t", p.high_watermark) == [b"a", b"b", b"c"]

    run(tmp_path, 2, scenario, settings=slow)
