"""ListGroups alone at size (issue 12): N groups made cheaply (offsets committed without
a member, pipelined, so 10,000 take seconds instead of the minutes of N joins), then
ListGroups per request: the time until the whole response frame is in (the broker's
cost, on loopback) and with the client's decode added. `--compare SRC` starts a second
broker from another source tree (say a checkout of main) and alternates the two per
request, so both see the same machine load.

    python -m bench.list_groups --groups 100,1000,10000 [--compare /path/to/main/src]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.brokers import cpu_seconds
from bench.scale_broker import RawClient, ScaleBroker, create_topics
from bench.scale_groups import LIST_GROUPS, TOPIC, schema, wait_for_coordinator
from odradek.protocol.client_framing import decode_response
from odradek.protocol.errors import ErrorCode

COMMIT = 8
PIPELINE = 200  # OffsetCommits in flight on the one connection
ROUNDS = 7


class TreeBroker(ScaleBroker):
    """A broker whose package comes from `src` (None: this tree's)."""

    src: str | None = None

    def env(self) -> dict[str, str]:  # type: ignore[override]
        env = ScaleBroker.env()
        if self.src is not None:
            env["PYTHONPATH"] = self.src
        return env


def commit_groups(client: RawClient, groups: list[str]) -> None:
    cs = schema(COMMIT, 8)
    for at in range(0, len(groups), PIPELINE):
        sent = []
        for group in groups[at:at + PIPELINE]:
            cid, request = client.framing.build(
                COMMIT, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None, topics=(cs.OffsetCommitRequestTopic(
                    name=TOPIC, partitions=(cs.OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                        committed_metadata=""),)),))
            client.sock.sendall(request)
            sent.append(cid)
        for cid in sent:
            while (frame := client.frames.next_frame()) is None:
                client.frames.feed(client.sock.recv(1 << 20))
            code = decode_response(COMMIT, 8, frame, cid).topics[0].partitions[0].error_code
            if code != ErrorCode.none:
                raise RuntimeError(f"OffsetCommit: {ErrorCode(code).name}")


def list_once(client: RawClient, size: int) -> tuple[float, float]:
    """(ms until the frame is in, ms with the decode)."""
    started = time.perf_counter()
    cid, frame = client.call_raw(LIST_GROUPS, 4, states_filter=())
    received = time.perf_counter()
    listed = decode_response(LIST_GROUPS, 4, frame, cid)
    decoded = time.perf_counter()
    if len(listed.groups) != size:
        raise RuntimeError(f"ListGroups lists {len(listed.groups)} of {size} groups")
    return (received - started) * 1000, (decoded - started) * 1000


def measure(size: int, trees: dict[str, str | None], workdir: Path) -> dict[str, Any]:
    groups = [f"list-group-{i:05d}" for i in range(size)]
    brokers: dict[str, TreeBroker] = {}
    clients: dict[str, RawClient] = {}
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    try:
        for name, src in trees.items():
            data = Path(tempfile.mkdtemp(prefix=f"lg-{name}-{size}-", dir=workdir))
            b = brokers[name] = TreeBroker(data, workdir / f"broker-lg-{name}-{size}.log",
                                           {"group.initial.rebalance.delay.ms": "0"})
            b.src = src
            b.start(0)
            create_topics(b.bootstrap, [(TOPIC, 1)])
            wait_for_coordinator(lambda b=b: RawClient(b.bootstrap), groups[0], 120)
            clients[name] = RawClient(b.bootstrap)
            commit_groups(clients[name], groups)
            list_once(clients[name], size)  # warm-up (and the cache, where there is one)
        cpu_before = {name: sum(cpu_seconds(b.pid)) for name, b in brokers.items()}
        for _ in range(ROUNDS):
            for name in trees:
                samples[name].append(list_once(clients[name], size))
        cpu = {name: (sum(cpu_seconds(b.pid)) - cpu_before[name]) / ROUNDS * 1000
               for name, b in brokers.items()}
    finally:
        for c in clients.values():
            c.close()
        for b in brokers.values():
            b.stop()
            shutil.rmtree(b.data_dir, ignore_errors=True)
    row: dict[str, Any] = {"size": size}
    for name, got in samples.items():
        row[name] = (statistics.median(s[0] for s in got), statistics.median(s[1] for s in got),
                     cpu[name])
    return row


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--groups", default="100,1000,10000", help="group counts, comma-separated")
    ap.add_argument("--compare", default=None, metavar="SRC",
                    help="another source tree's src/ to alternate with this one")
    args = ap.parse_args(argv)
    trees: dict[str, str | None] = {"this": None}
    if args.compare:
        trees["compare"] = args.compare
    workdir = Path(tempfile.mkdtemp(prefix="bench-list-groups-"))
    try:
        rows = [measure(int(n), trees, workdir) for n in args.groups.split(",")]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nListGroups v4, median of {ROUNDS} alternated requests (ms: frame in / decoded"
          f" / broker CPU per request), load average {os.getloadavg()[0]:.1f}\n")
    print(f"{'groups':>8} " + " ".join(f"{name:>28}" for name in trees))
    for row in rows:
        cells = " ".join(f"{row[n][0]:>8.1f} / {row[n][1]:>7.1f} / {row[n][2]:>6.1f}"
                         for n in trees)
        print(f"{row['size']:>8,} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
