"""ACLs on ZooKeeper at size: what a broker pays for 1, 1,000 and 10,000 ACL resources.

- start: a broker's metadata store reading the whole `/kafka-acl…` tree (the broker's
  start-up and every reconnect);
- propagate: one CreateAcls written through broker A (its znode and notification)
  until broker B's image holds it (B watches the change list, re-reads one resource);
- load: the broker's authorizer built from the image (server/acl_store.load, at
  start-up), and update: one change applied to it in place (acl_store.update, what
  the broker does on every "acls" event).

A real ZooKeeper (Debian's, started here), two in-process stores on one event loop.

    python -m bench.acl_zookeeper [--sizes 1,1000,10000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from kazoo.client import KazooClient

from odradek.cluster import zk_acls
from odradek.cluster.local_zookeeper import ZooKeeperProcess
from odradek.cluster.metadata import BrokerInfo
from odradek.cluster.zk_client import ZkSession
from odradek.cluster.zk_store import ZkMetadataStore
from odradek.security.authorizer import AclAuthorizer
from odradek.server import acl_store


def _row(i: int) -> tuple[str, ...]:
    return ("TOPIC", f"t{i}", "LITERAL", f"User:u{i}", "*", "READ", "ALLOW")


def _preload(connect: str, n: int) -> None:
    """n resources of one ACL each, written straight into ZooKeeper (async, pipelined)."""
    zk = KazooClient(hosts=connect, timeout=30)
    zk.start(30)
    try:
        zk.ensure_path(f"{zk_acls.LITERAL_ROOT}/Topic")
        pending = [zk.create_async(zk_acls.resource_path(zk_acls.key_of(_row(i))),
                                   zk_acls.encode_entries([_row(i)])) for i in range(n)]
        for p in pending:
            p.get(30)
    finally:
        zk.stop()
        zk.close()


async def _store(connect: str, node_id: int) -> ZkMetadataStore:
    session = ZkSession(connect, session_timeout_ms=10_000, connection_timeout_ms=10_000)
    await asyncio.get_running_loop().run_in_executor(None, session.start)
    store = ZkMetadataStore(session, local_broker=BrokerInfo(node_id, "127.0.0.1", 1),
                            broker_defaults=lambda: {})
    await store.start("bench")
    return store


async def _measure(connect: str, n: int, rounds: int) -> dict[str, float]:
    started = time.perf_counter()
    a = await _store(connect, 1)
    start_s = time.perf_counter() - started
    b = await _store(connect, 2)
    assert len(a.image.acls) == n and len(b.image.acls) == n, (len(a.image.acls), n)
    latencies = []
    rows = list(a.image.acls)
    for r in range(rounds):
        row = ("TOPIC", f"new{r}", "LITERAL", "User:x", "*", "WRITE", "ALLOW")
        rows.append(row)
        began = time.perf_counter()
        await a.set_acls(rows)
        while row not in b.image.acls:
            await asyncio.sleep(0.0005)
        latencies.append(time.perf_counter() - began)
    began = time.perf_counter()
    authorizer = acl_store.load(AclAuthorizer(), b.image.acls)
    load_s = time.perf_counter() - began
    before = b.image.acls
    after = (*before, ("GROUP", "g", "LITERAL", "User:y", "*", "READ", "ALLOW"))
    began = time.perf_counter()
    acl_store.update(authorizer, before, after)
    update_s = time.perf_counter() - began
    for s in (a, b):
        s.stop()
        s.session.stop()
    return {"start_ms": start_s * 1000, "propagate_ms": statistics.median(latencies) * 1000,
            "load_ms": load_s * 1000, "update_ms": update_s * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,1000,10000")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperProcess(Path(tmp) / "zk")
        zk.start()
        try:
            print(f"load average {os.getloadavg()[0]:.1f}; {args.rounds} propagations each")
            print(f"{'ACL resources':>14} {'start (ms)':>11} {'propagate p50 (ms)':>19} "
                  f"{'authorizer load (ms)':>21} {'update (ms)':>12}")
            for n in sizes:
                chroot = f"/b{uuid.uuid4().hex[:8]}"
                connect = f"{zk.connect}{chroot}"
                root = KazooClient(hosts=zk.connect, timeout=10)
                root.start(10)
                root.ensure_path(chroot)
                root.stop()
                root.close()
                _preload(connect, n)
                m = asyncio.run(_measure(connect, n, args.rounds))
                print(f"{n:>14,} {m['start_ms']:>11.1f} {m['propagate_ms']:>19.2f} "
                      f"{m['load_ms']:>21.1f} {m['update_ms']:>12.1f}")
        finally:
            zk.stop()


if __name__ == "__main__":
    main()
