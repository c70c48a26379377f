"""How long a new group coordinator takes to load its `__consumer_offsets` partition.

Writes N groups (each: its GroupMetadata with one member and two committed offsets)
into one partition of a real `storage.Log` in a temp dir, then times a coordinator's
election on that partition until its groups are served.

    python -m bench.coordinator_load [--groups 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from odradek.coordinator.group import GroupConfig, GroupCoordinator
from odradek.coordinator.group.consumer import TopicsView
from odradek.protocol.group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from odradek.protocol.records import NewRecord, encode_batch
from odradek.storage.log import Log
from odradek.storage.log_config import LogConfig

PARTITION = 0


class LocalOffsetsLog:
    """One `__consumer_offsets` partition on disk, as the coordinator reads it."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.topics = TopicsView(lambda name: (uuid.UUID(int=1), 2), lambda _id: "t",
                                 lambda: ["t"])

    async def append(self, partition: int, records: Sequence[tuple[bytes, bytes | None]],
                     **_: object) -> None:
        self.log.append_as_leader(bytearray(encode_batch(
            [NewRecord(key=k, value=v) for k, v in records])), 0)

    def read(self, partition: int, offset: int, max_bytes: int) -> tuple[bytes, int]:
        end = self.log.log_end_offset
        if offset >= end:
            return b"", end
        return bytes(self.log.read(offset, max_bytes, max_offset=end).records), end

    def log_start_offset(self, partition: int) -> int:
        return self.log.log_start_offset

    def leader_epoch(self, partition: int) -> int:
        return 0


def fill(log: Log, groups: int) -> None:
    now = int(time.time() * 1000)
    batch: list[NewRecord] = []
    for i in range(groups):
        group = f"group-{i}"
        member = MemberMetadata(f"{group}-m", "client", "/127.0.0.1", 45000, 300000,
                                b"\x00\x01", b"\x00\x01")
        batch.append(NewRecord(
            key=encode_key(GroupMetadataKey(group)),
            value=encode_group_metadata_value(GroupMetadataValue(
                "consumer", 1, "range", member.member_id, now, (member,)))))
        for p in range(2):
            batch.append(NewRecord(key=encode_key(OffsetCommitKey(group, "t", p)),
                                   value=encode_offset_commit_value(
                                       OffsetCommitValue(100 + p, "", now, -1, -1))))
        if len(batch) >= 300:
            log.append_as_leader(bytearray(encode_batch(batch)), 0)
            batch = []
    if batch:
        log.append_as_leader(bytearray(encode_batch(batch)), 0)


async def load_once(offsets: LocalOffsetsLog, groups: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) from the election until every group is served: the
    CPU figure is the one to compare on a machine shared with other work."""
    coordinator = GroupCoordinator(GroupConfig(offsets_partitions=1), offsets)
    started, cpu = time.perf_counter(), time.process_time()
    coordinator.on_elected([PARTITION])
    while len(coordinator.list_groups()) < groups:
        await asyncio.sleep(0.001)
    elapsed = time.perf_counter() - started, time.process_time() - cpu
    coordinator.stop()
    return elapsed


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        log = Log.open(Path(tmp) / f"__consumer_offsets-{PARTITION}",
                       LogConfig(cleanup_policy=("compact",)))
        try:
            fill(log, args.groups)
            offsets = LocalOffsetsLog(log)
            times = [asyncio.run(load_once(offsets, args.groups)) for _ in range(args.repeat)]
        finally:
            log.close()
    wall, cpu = sorted(t[0] for t in times), sorted(t[1] for t in times)
    print(f"loaded {args.groups} groups ({log.log_end_offset} records): wall best "
          f"{wall[0]:.3f}s median {wall[len(wall) // 2]:.3f}s; CPU best {cpu[0]:.3f}s "
          f"median {cpu[len(cpu) // 2]:.3f}s")


if __name__ == "__main__":
    main()
