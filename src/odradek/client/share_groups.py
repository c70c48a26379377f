"""The share group queries no binding has (ListGroups with the `share` type,
ShareGroupDescribe, DescribeShareGroupOffsets), asked as Kafka's Admin client asks
them, each to the group's coordinator: what `odradek share-groups` and the console's
share groups page show."""

from __future__ import annotations

from typing import Any

from odradek.client import ClientError, raw
from odradek.client.raw import error_name

CLIENT_ID = "odradek-share-groups"
TIMEOUT_S = 30


def address(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    return host, int(port)


def coordinator(bootstrap: str, group: str) -> tuple[str, int]:
    found = raw.request(address(bootstrap), 10, 1, CLIENT_ID, key=group, key_type=0)
    if found.error_code:
        raise ClientError(f"FindCoordinator for {group}: {error_name(found.error_code)}")
    return found.host, int(found.port)


def share_groups(bootstrap: str) -> list[tuple[str, str]]:
    """(group id, state) of every share group (ListGroups v5 with the `share` type, to
    every broker: each lists the groups it coordinates)."""
    md = raw.request(address(bootstrap), 3, 12, CLIENT_ID, topics=(),
                     allow_auto_topic_creation=False,
                     include_topic_authorized_operations=False)
    out: dict[str, str] = {}
    for b in md.brokers:
        r = raw.request((b.host, b.port), 16, 5, CLIENT_ID, states_filter=(),
                        types_filter=("share",))
        if r.error_code:
            raise ClientError(f"ListGroups on broker {b.node_id}: {error_name(r.error_code)}")
        for g in r.groups:
            out[g.group_id] = g.group_state
    return sorted(out.items())


def describe_group(bootstrap: str, group: str) -> tuple[tuple[str, int], Any]:
    """(coordinator address, ShareGroupDescribe's group)."""
    where = coordinator(bootstrap, group)
    r = raw.request(where, 77, 1, CLIENT_ID, group_ids=(group,),
                    include_authorized_operations=False)
    g = r.groups[0]
    if g.error_code:
        raise ClientError(f"Share group '{group}': {error_name(g.error_code)}")
    return where, g


def offset_rows(bootstrap: str, group: str) -> list[tuple[Any, ...]]:
    """(group, topic, partition, leader epoch, start offset, lag) of every
    share-partition the group has state for."""
    where = coordinator(bootstrap, group)
    s = raw.schema(90, 1)
    r = raw.request(where, 90, 1, CLIENT_ID, groups=(
        s.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None),))
    g = r.groups[0]
    if g.error_code:
        raise ClientError(f"Share group '{group}': {error_name(g.error_code)}")
    rows = []
    for t in sorted(g.topics, key=lambda t: t.topic_name):
        for p in sorted(t.partitions, key=lambda p: p.partition_index):
            known = p.error_code == 0 and p.start_offset >= 0
            rows.append((group, t.topic_name, p.partition_index,
                         p.leader_epoch if known and p.leader_epoch >= 0 else None,
                         p.start_offset if known else None,
                         p.lag if known and p.lag >= 0 else None))
    return rows


def with_lag(config: dict[str, Any], rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """offset_rows with every known start offset's lag: as DescribeShareGroupOffsets v1
    counts it (records from the start offset to the high watermark not yet delivered
    for good), or from the start offset to the log end when the coordinator cannot
    count it (it does not lead the partition). `config`: a confluent-kafka consumer's."""
    from confluent_kafka import Consumer, TopicPartition

    if all(r[5] is not None or r[4] is None for r in rows):
        return rows
    probe = Consumer({**config, "group.id": "odradek-share-lag-probe"})
    try:
        out = []
        for group, topic, partition, epoch, start, lag in rows:
            if lag is None and start is not None:
                _, high = probe.get_watermark_offsets(TopicPartition(topic, partition),
                                                      timeout=TIMEOUT_S)
                lag = max(high - start, 0)
            out.append((group, topic, partition, epoch, start, lag))
        return out
    finally:
        probe.close()
