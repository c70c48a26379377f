"""The consumer-groups dimension of the scale benchmark (issue 12).

One size at a time, on a fresh broker (`group.initial.rebalance.delay.ms=0`): N classic
groups of one member each join (JoinGroup twice, as a member without an id does, then
SyncGroup), commit an offset and fetch it back; then ListGroups, a clean restart, and
the time until the coordinator serves every group's offsets again (its load of
`__consumer_offsets`, the goal: 10,000 groups in < 5 s). Latencies are per request,
on one connection, with the broker's own protocol codecs (no client library).

    python -m bench.scale --groups 100,1000,10000
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.brokers import cpu_seconds, rss_kib
from odradek.protocol.client_framing import decode_response
from odradek.protocol.errors import ErrorCode
from odradek.protocol.messages import request_class

JOIN, SYNC, COMMIT, FETCH_OFFSETS, LIST_GROUPS, FIND_COORDINATOR = 11, 14, 8, 9, 16, 10
TOPIC = "scale-groups"


def schema(api_key: int, version: int) -> Any:
    return sys.modules[request_class(api_key, version).__module__]


def call(client: Any, api_key: int, version: int, **fields: Any) -> Any:
    cid, frame = client.call_raw(api_key, version, **fields)
    return decode_response(api_key, version, frame, cid)


def timed(samples: list[float], fn: Callable[[], Any]) -> Any:
    started = time.perf_counter()
    out = fn()
    samples.append((time.perf_counter() - started) * 1000)
    return out


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else 0.0


def join_and_commit(client: Any, group: str, offset: int, joins: list[float],
                    commits: list[float]) -> None:
    js = schema(JOIN, 5)
    protocols = (js.JoinGroupRequestProtocol(name="range", metadata=b""),)

    def join(member: str) -> Any:
        return call(client, JOIN, 5, group_id=group, session_timeout=timedelta(seconds=45),
                    rebalance_timeout=timedelta(seconds=60), member_id=member,
                    group_instance_id=None, protocol_type="bench", protocols=protocols)

    started = time.perf_counter()
    first = join("")
    if first.error_code == ErrorCode.member_id_required:
        first = join(first.member_id)
    if first.error_code != ErrorCode.none:
        raise RuntimeError(f"JoinGroup {group}: {ErrorCode(first.error_code).name}")
    ss = schema(SYNC, 3)
    synced = call(client, SYNC, 3, group_id=group, generation_id=first.generation_id,
                  member_id=first.member_id, group_instance_id=None,
                  assignments=(ss.SyncGroupRequestAssignment(member_id=first.member_id,
                                                             assignment=b""),))
    if synced.error_code != ErrorCode.none:
        raise RuntimeError(f"SyncGroup {group}: {ErrorCode(synced.error_code).name}")
    joins.append((time.perf_counter() - started) * 1000)
    cs = schema(COMMIT, 8)
    resp = timed(commits, lambda: call(
        client, COMMIT, 8, group_id=group, generation_id_or_member_epoch=first.generation_id,
        member_id=first.member_id, group_instance_id=None,
        topics=(cs.OffsetCommitRequestTopic(name=TOPIC, partitions=(
            cs.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset,
                                            committed_leader_epoch=-1,
                                            committed_metadata=""),)),)))
    code = resp.topics[0].partitions[0].error_code
    if code != ErrorCode.none:
        raise RuntimeError(f"OffsetCommit {group}: {ErrorCode(code).name}")


def fetch_offset(client: Any, group: str) -> int | None:
    """The group's committed offset; None while the coordinator is loading."""
    fs = schema(FETCH_OFFSETS, 8)
    resp = call(client, FETCH_OFFSETS, 8, require_stable=False, groups=(
        fs.OffsetFetchRequestGroup(group_id=group, topics=(
            fs.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(0,)),)),))
    g = resp.groups[0]
    if g.error_code in (ErrorCode.coordinator_load_in_progress,
                        ErrorCode.coordinator_not_available, ErrorCode.not_coordinator):
        return None
    if g.error_code != ErrorCode.none:
        raise RuntimeError(f"OffsetFetch {group}: {ErrorCode(g.error_code).name}")
    return int(g.topics[0].partitions[0].committed_offset)


def wait_for_coordinator(client_of: Callable[[], Any], group: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        client = client_of()
        try:
            resp = call(client, FIND_COORDINATOR, 4, key_type=0, coordinator_keys=(group,))
            if resp.coordinators[0].error_code == ErrorCode.none:
                return
        finally:
            client.close()
        time.sleep(0.1)
    raise RuntimeError(f"no coordinator for {group} within {timeout:.0f}s")


def measure_groups(size: int, workdir: Path, say: Callable[[str], None]) -> dict[str, float]:
    from bench.scale_broker import RawClient, ScaleBroker, create_topics

    data_dir = Path(tempfile.mkdtemp(prefix=f"groups-{size}-", dir=workdir))
    broker = ScaleBroker(data_dir, workdir / f"broker-groups-{size}.log",
                         {"group.initial.rebalance.delay.ms": "0"})
    groups = [f"scale-group-{i:05d}" for i in range(size)]
    out: dict[str, float] = {"size": size}
    try:
        broker.start(0)
        create_topics(broker.bootstrap, [(TOPIC, 1)])
        wait_for_coordinator(lambda: RawClient(broker.bootstrap), groups[0], 120)
        client = RawClient(broker.bootstrap)
        joins: list[float] = []
        commits: list[float] = []
        fetches: list[float] = []
        for i, group in enumerate(groups):
            join_and_commit(client, group, i + 1, joins, commits)
        for group in groups:
            timed(fetches, lambda g=group: fetch_offset(client, g))  # type: ignore[misc]
        lists: list[float] = []
        for _ in range(5):
            listed = timed(lists, lambda: call(client, LIST_GROUPS, 4, states_filter=()))
        if len(listed.groups) < size:
            raise RuntimeError(f"ListGroups lists {len(listed.groups)} of {size} groups")
        client.close()
        out.update(join_p50_ms=percentile(joins, 0.5), join_p99_ms=percentile(joins, 0.99),
                   commit_p50_ms=percentile(commits, 0.5),
                   commit_p99_ms=percentile(commits, 0.99),
                   fetch_p50_ms=percentile(fetches, 0.5),
                   fetch_p99_ms=percentile(fetches, 0.99),
                   list_ms=percentile(lists, 0.5), groups_rss_mib=rss_kib(broker.pid) / 1024)
        say(f"{size} groups: joined, committed, fetched")
        broker.stop()
        restart = broker.start(0)
        started = time.monotonic()
        probe = [groups[0], groups[size // 2], groups[-1]]
        client = RawClient(broker.bootstrap)
        while any(fetch_offset(client, g) is None for g in probe):
            if time.monotonic() - started > 600:
                raise RuntimeError("groups not loaded within 10 minutes")
            time.sleep(0.02)
        out["load_s"] = time.monotonic() - started
        out["restart_to_groups_s"] = restart + out["load_s"]
        out["load_cpu_s"] = sum(cpu_seconds(broker.pid))
        wrong = [g for i, g in enumerate(groups) if fetch_offset(client, g) != i + 1]
        client.close()
        if wrong:
            raise RuntimeError(f"{len(wrong)} groups lost their offset, e.g. {wrong[:3]}")
        say(f"{size} groups: served again {out['load_s']:.2f}s after the restart")
    finally:
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return out


GROUP_METRICS = (
    ("join_p50_ms", "join + sync p50 (ms)", "{:.2f}", ""),
    ("join_p99_ms", "join + sync p99 (ms)", "{:.2f}", ""),
    ("commit_p50_ms", "OffsetCommit p50 (ms)", "{:.2f}", ""),
    ("commit_p99_ms", "OffsetCommit p99 (ms)", "{:.2f}", ""),
    ("fetch_p50_ms", "OffsetFetch p50 (ms)", "{:.2f}", ""),
    ("fetch_p99_ms", "OffsetFetch p99 (ms)", "{:.2f}", ""),
    ("list_ms", "ListGroups (ms)", "{:.1f}", ""),
    ("groups_rss_mib", "RSS (MiB)", "{:,.0f}", ""),
    ("load_s", "groups served after a restart (s)", "{:.2f}", "< 5 s at 10,000"),
    ("restart_to_groups_s", "… from the exec (s)", "{:.2f}", ""),
    ("load_cpu_s", "restart + load, broker CPU (s)", "{:.2f}", ""),
)
