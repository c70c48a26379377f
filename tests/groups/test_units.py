"""Sans-IO pieces: the `__consumer_offsets` records, the coordinator partition, the
server-side assignors and offset retention — without a broker."""

from __future__ import annotations

import asyncio
import struct
import uuid
from collections.abc import Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.group import GroupConfig, GroupCoordinator, OffsetCommit
from odradek.coordinator.group.assignors import range_, uniform
from odradek.coordinator.group.consumer import TopicsView
from odradek.coordinator.group.coordinator import java_hash_code, partition_for
from odradek.protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_consumer_assignment,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_consumer_assignment,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from odradek.protocol.records import NewRecord, Record, decode_batches, encode_batch
from odradek.storage.dump_decoders import parse_offsets


def test_java_string_hash_code_and_coordinator_partition() -> None:
    # values of Java's "…".hashCode()
    assert java_hash_code("") == 0
    assert java_hash_code("a") == 97
    assert java_hash_code("hello") == 99162322
    assert java_hash_code("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert java_hash_code("héllo") == 103094734
    assert java_hash_code("\U0001F600") == 31 * 0xD83D + 0xDE00  # UTF-16 code units
    # Kafka's Utils.abs(MIN_VALUE) is 0, not MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50


def test_offset_commit_is_written_as_version_3_and_read_back() -> None:
    key = encode_key(OffsetCommitKey("g", "orders", 3))
    assert key == struct.pack(">h", 1) + b"\x00\x01g\x00\x06orders" + struct.pack(">i", 3)
    value = encode_offset_commit_value(OffsetCommitValue(42, "meta", 1700000000000, 7))
    assert struct.unpack_from(">h", value)[0] == 3  # Burrow 1.2.1 reads 0, 1 and 3
    assert decode_offset_commit_value(value) == OffsetCommitValue(42, "meta", 1700000000000, 7)
    with_expiry = encode_offset_commit_value(OffsetCommitValue(5, "", 10, -1, 20))
    assert struct.unpack_from(">h", with_expiry)[0] == 1
    assert decode_offset_commit_value(with_expiry).expire_timestamp == 20
    assert decode_key(key) == OffsetCommitKey("g", "orders", 3)


def test_group_metadata_version_follows_static_membership() -> None:
    member = MemberMetadata("m-1", "client", "/127.0.0.1", 6000, 30000, b"sub",
                            encode_consumer_assignment({"t": [0, 2]}))
    dynamic = GroupMetadataValue("consumer", 4, "range", "m-1", 123, (member,))
    data = encode_group_metadata_value(dynamic)
    assert struct.unpack_from(">h", data)[0] == 1  # Burrow 1.2.1 reads 0 and 1 only
    back = decode_group_metadata_value(data)
    assert back.members[0].assignment == member.assignment
    assert back.current_state_timestamp == -1  # v1 has none: the loader uses record time
    static = GroupMetadataValue("consumer", 4, "range", "m-1", 123, (MemberMetadata(
        "m-1", "client", "/h", 6000, 30000, b"", b"", group_instance_id="pod-1"),))
    data = encode_group_metadata_value(static)
    assert struct.unpack_from(">h", data)[0] == 3
    assert decode_group_metadata_value(data) == static
    assert decode_consumer_assignment(member.assignment) == {"t": [0, 2]}
    assert decode_key(encode_key(GroupMetadataKey("g"))) == GroupMetadataKey("g")


@given(st.text(max_size=20), st.integers(-1, 2**40), st.integers(-1, 2**31 - 1),
       st.sampled_from([0, 1, 2, 3, 4]))
def test_offset_commit_value_round_trips_at_every_version(
        metadata: str, offset: int, epoch: int, version: int) -> None:
    value = OffsetCommitValue(offset, metadata, 99, epoch if version >= 3 else -1,
                              77 if version == 1 else -1)
    assert decode_offset_commit_value(encode_offset_commit_value(value, version)) == value


def test_the_dump_tool_reads_what_the_coordinator_writes() -> None:
    record = Record(0, 1, encode_key(OffsetCommitKey("g", "t", 0)),
                    encode_offset_commit_value(OffsetCommitValue(9, "", 5, 2)))
    key, value = parse_offsets(record)
    assert key == '{"type":"1","data":{"group":"g","topic":"t","partition":0}}'
    assert value == ('{"version":"3","data":{"offset":9,"leaderEpoch":2,"metadata":"",'
                     '"commitTimestamp":5}}')


def test_uniform_is_balanced_and_sticky() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    subs = {"m1": {a, b}, "m2": {a, b}, "m3": {a, b}}
    first = uniform(subs, {a: 4, b: 5}, {})
    sizes = sorted(sum(len(p) for p in m.values()) for m in first.values())
    assert sizes == [3, 3, 3]
    subs["m4"] = {a, b}
    second = uniform(subs, {a: 4, b: 5}, first)
    moved = sum(len(first[m].get(t, set()) - second[m].get(t, set()))
                for m in first for t in (a, b))
    assert sorted(sum(len(p) for p in m.values()) for m in second.values()) == [2, 2, 2, 3]
    assert moved == 2  # only what the newcomer needs


def test_uniform_with_different_subscriptions() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    out = uniform({"m1": {a}, "m2": {a, b}}, {a: 2, b: 4}, {})
    assert out["m1"] == {a: {0, 1}}
    assert out["m2"] == {b: {0, 1, 2, 3}}


def test_range_gives_contiguous_ranges_per_topic() -> None:
    a = uuid.uuid4()
    out = range_({"m1": {a}, "m2": {a}}, {a: 5}, {})
    assert out == {"m1": {a: {0, 1, 2}}, "m2": {a: {3, 4}}}


class MemoryLog:
    """An in-memory `__consumer_offsets` for the coordinator."""

    def __init__(self) -> None:
        self.batches: dict[int, list[bytes]] = {}
        self.topics = TopicsView(lambda name: (uuid.UUID(int=1), 1), lambda _id: "t",
                                 lambda: ["t"])

    async def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]],
                     **_: Any) -> None:
        batches = self.batches.setdefault(partition, [])
        base = sum(len(next(iter(decode_batches(b)))) for b in batches)
        batches.append(encode_batch([NewRecord(key=k, value=v) for k, v in records],
                                    base_offset=base))

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        data = b"".join(self.batches.get(partition, []))
        end = sum(len(b.records) for b in decode_batches(data))
        return (data if offset < end else b""), end

    def log_start_offset(self, partition: int) -> int:
        return 0

    def leader_epoch(self, partition: int) -> int:
        return 0


def test_offsets_expire_after_retention_and_survive_a_reload() -> None:
    async def run() -> None:
        log = MemoryLog()
        config = GroupConfig(offsets_retention_ms=1000)
        coordinator = GroupCoordinator(config, log)
        p = coordinator.partition_for("g")
        coordinator.on_elected([p])
        await asyncio.sleep(0.01)
        errors = await coordinator.commit_offsets("g", "", None, -1, [OffsetCommit("t", 0, 5)])
        assert list(errors.values()) == [0]
        # a second coordinator (a new leader) loads the same group from the log
        again = GroupCoordinator(config, log)
        again.on_elected([p])
        await asyncio.sleep(0.01)
        assert again.fetch_offsets("g", [("t", 0)])[("t", 0)].offset == 5
        now = again.groups["g"].offsets[("t", 0)].commit_timestamp
        assert await again.expire_offsets(now + 500) == 0
        assert await again.expire_offsets(now + 1500) == 1
        assert "g" not in again.groups  # an empty group with no offsets is removed
        third = GroupCoordinator(config, log)
        third.on_elected([p])
        await asyncio.sleep(0.01)
        assert third.fetch_offsets("g", None) == {}

    asyncio.run(run())
