"""Reading the znodes a broker's image is made of, each with a watch (zk_store.py): data
znodes in bulk, children lists and missing znodes one by one. Nothing here blocks the
event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import WatchedEvent

from odradek.cluster import zk_acls
from odradek.cluster.zk_cache import ReadResult, is_children_path
from odradek.cluster.zk_client import ZkError, ZkSession
from odradek.protocol.errors import KafkaError

BULK_READ = 500  # watched znodes read per batch
Watch = Callable[[WatchedEvent], None]


async def read_watched(zk: ZkSession, loop: asyncio.AbstractEventLoop, paths: list[str],
                       watch: Watch) -> list[ReadResult]:
    """Read and watch `paths`: the data znodes (a failover's thousands of partition
    states) queued together and awaited in one thread's wait; children lists, ACL
    znodes and missing znodes one by one."""
    bulk = [p for p in paths if not is_children_path(p) and not zk_acls.AclCache.handles(p)]
    found: dict[str, ReadResult] = {}
    # in chunks: the controller shares this connection, and a request of its own
    # queued behind 10,000 reads waited seconds during a failover
    for i in range(0, len(bulk) if len(bulk) > 1 else 0, BULK_READ):
        chunk = bulk[i:i + BULK_READ]
        outcomes = await loop.run_in_executor(None, zk.wait_all, zk.submit_gets(chunk, watch))
        for path, outcome in zip(chunk, outcomes, strict=True):
            if isinstance(outcome, NoNodeError):
                continue  # watched for its creation below
            if isinstance(outcome, Exception):
                raise ZkError(str(outcome)) from outcome
            data, stat = outcome
            found[path] = ("data", bytes(data or b""), stat)
    rest = [p for p in paths if p not in found]
    if rest:
        found.update(zip(rest, await asyncio.gather(*(read_one(zk, loop, p, watch)
                                                      for p in rest)), strict=True))
    return [found[p] for p in paths]


async def read_one(zk: ZkSession, loop: asyncio.AbstractEventLoop, path: str,
                   on_watch: Watch) -> ReadResult:
    """One znode (or children list) with a watch; a missing one is watched for its
    creation. ACL znodes are watched only where their notifications are not enough."""
    watch = None if zk_acls.AclCache.handles(path) else on_watch
    if zk_acls.AclCache.watched(path):
        watch = on_watch
    try:
        if is_children_path(path):
            names = await zk.run_async(zk.client.get_children_async(path, watch=watch), loop)
            return "children", list(names), None
        data, stat = await zk.run_async(zk.client.get_async(path, watch=watch), loop)
        return "data", bytes(data or b""), stat
    except NoNodeError:
        if watch is None:
            return "none", None, None
        stat = await zk.run_async(zk.client.exists_async(path, watch=watch), loop)
        if stat is not None:
            return await read_one(zk, loop, path, on_watch)  # created in between
        return "none", None, None
    except Exception as e:
        if isinstance(e, KafkaError):
            raise
        raise ZkError(str(e)) from e
