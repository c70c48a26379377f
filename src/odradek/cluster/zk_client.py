"""A broker's ZooKeeper session (kazoo), shared by its registration, watches and controller.

What kazoo does and does not do, and what this wrapper adds for it:
- kazoo reports SUSPENDED when the connection drops, and drops every watch callback
  then (it fires them once with an event of type NONE). It does not re-register them:
  whoever watches must re-read everything after CONNECTED. `on_state` listeners get
  "suspended", "connected" (same session) and "new-session" (after an expiry).
- kazoo never reports LOST while the server is unreachable — only when it reaches a
  server that says the session expired. So `suspended_for()` is there for the broker
  to fence itself with its own timer.
- `transaction().commit()` returns a list with exceptions in it instead of raising:
  `commit()` here raises the first failure.
- The synchronous calls wait forever while disconnected: every call here is bounded
  by `op_timeout`.

Threads: kazoo calls state listeners on its connection thread and watch callbacks on
its callback thread; both must return quickly and hand work to their owner (the
broker's event loop, or the controller's thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError, UnimplementedError
from kazoo.protocol.paths import _prefix_root
from kazoo.protocol.serialization import GetData
from kazoo.protocol.states import KeeperState, WatchedEvent, ZnodeStat

from odradek.cluster import zk_data as zd
from odradek.cluster.zk_multi_read import MultiRead

log = logging.getLogger(__name__)

StateListener = Callable[[str], None]


class ZkError(Exception):
    """ZooKeeper could not be reached or refused an operation."""


class ZkTransactionFailed(Exception):
    """Op `index` of a multi-op transaction failed with `error` (nothing was applied)."""

    def __init__(self, index: int, error: BaseException) -> None:
        super().__init__(f"transaction op {index} failed: {error!r}")
        self.index = index
        self.error = error


def _failure(results: list[Any]) -> ZkTransactionFailed | None:
    # the op that failed names the reason; the others say "rolled back"
    for i, r in enumerate(results):
        if isinstance(r, Exception) and type(r).__name__ != "RolledBackError":
            return ZkTransactionFailed(i, r)
    for i, r in enumerate(results):
        if isinstance(r, Exception):
            return ZkTransactionFailed(i, r)
    return None


class ZkSession:
    def __init__(self, hosts: str, *, session_timeout_ms: int, connection_timeout_ms: int,
                 op_timeout_s: float = 5.0) -> None:
        self.hosts = hosts
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self.op_timeout = op_timeout_s
        self._multi_read = True  # until ZooKeeper says it has none
        self.client = KazooClient(
            hosts=hosts,
            timeout=session_timeout_ms / 1000,
            # keep trying for ever: the broker decides when a missing ZooKeeper matters
            connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 1.5, "max_delay": 1.0},
            command_retry={"max_tries": 0},
        )
        self._listeners: list[StateListener] = []
        self._lock = threading.Lock()
        self._suspended_at: float | None = None
        self._lost = False
        self.session_generation = 0  # bumped by every new session (after an expiry)
        self.client.add_listener(self._on_kazoo_state)

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self._ensure_chroot()
            self.client.start(timeout=self.connection_timeout_ms / 1000)
        except Exception as e:
            self.client.stop()
            raise ZkError(f"could not connect to ZooKeeper at {self.hosts} within "
                          f"{self.connection_timeout_ms} ms: {e}") from e
        self.session_generation = 1

    def _ensure_chroot(self) -> None:
        """`host:port/odradek` names a chroot; Kafka creates it when missing, and so do we
        (kazoo cannot create anything inside a chroot that does not exist)."""
        servers, slash, chroot = self.hosts.partition("/")
        if not slash or not chroot.strip("/"):
            return
        root = KazooClient(hosts=servers, timeout=self.session_timeout_ms / 1000)
        root.start(timeout=self.connection_timeout_ms / 1000)
        try:
            root.ensure_path("/" + chroot.strip("/"))
        finally:
            root.stop()
            root.close()

    def stop(self) -> None:
        """Close the session: ephemeral znodes (our registration, /controller) go at once."""
        try:
            self.client.stop()
            self.client.close()
        except Exception:
            log.debug("closing the ZooKeeper client failed", exc_info=True)

    @property
    def session_id(self) -> int | None:
        cid = self.client.client_id
        return int(cid[0]) if cid else None

    @property
    def connected(self) -> bool:
        return bool(self.client.connected)

    def add_state_listener(self, listener: StateListener) -> None:
        self._listeners.append(listener)

    def suspended_for(self) -> float:
        """Seconds since the connection was lost (0 when connected)."""
        with self._lock:
            if self._suspended_at is None:
                return 0.0
            return time.monotonic() - self._suspended_at

    def _on_kazoo_state(self, state: str) -> None:
        with self._lock:
            if state == KazooState.SUSPENDED:
                if self._suspended_at is None:
                    self._suspended_at = time.monotonic()
                event = "suspended"
            elif state == KazooState.LOST:
                self._lost = True
                if self._suspended_at is None:
                    self._suspended_at = time.monotonic()
                event = "expired"
            else:
                self._suspended_at = None
                if self._lost:
                    self._lost = False
                    self.session_generation += 1
                    event = "new-session"
                else:
                    event = "connected"
        log.info("ZooKeeper session %s: %s", self._session_text(), event)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("ZooKeeper state listener failed")

    def _session_text(self) -> str:
        sid = self.session_id
        return "none" if sid is None else f"0x{sid:x}"

    # ---- bounded synchronous operations ---------------------------------------------------

    def _wait(self, result: Any) -> Any:
        try:
            return result.get(timeout=self.op_timeout)
        except (NoNodeError, NodeExistsError):
            raise
        except Exception as e:
            if type(e).__module__.startswith("kazoo.exceptions") and not isinstance(
                    e, _CONNECTION_ERRORS):
                raise
            raise ZkError(f"ZooKeeper operation failed: {e!r}") from e

    def get(self, path: str, watch: Callable[[WatchedEvent], None] | None = None
            ) -> tuple[bytes, ZnodeStat] | None:
        """(data, stat), or None when the znode does not exist. With `watch`, the watch
        is left either way: on the data, or (for a missing znode) on its creation."""
        try:
            data, stat = self._wait(self.client.get_async(path, watch=watch))
            return bytes(data or b""), stat
        except NoNodeError:
            if watch is None:
                return None
        # missing: watch for its creation; it may have appeared in between
        stat = self._wait(self.client.exists_async(path, watch=watch))
        if stat is None:
            return None
        return self.get(path, watch)

    def children(self, path: str, watch: Callable[[WatchedEvent], None] | None = None
                 ) -> list[str]:
        try:
            return list(self._wait(self.client.get_children_async(path, watch=watch)))
        except NoNodeError:
            if watch is not None:
                self._wait(self.client.exists_async(path, watch=watch))
            return []

    def exists(self, path: str, watch: Callable[[WatchedEvent], None] | None = None
               ) -> ZnodeStat | None:
        return self._wait(self.client.exists_async(path, watch=watch))  # type: ignore[no-any-return]

    def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False,
               sequence: bool = False, makepath: bool = False) -> str:
        return str(self._wait(self.client.create_async(
            path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath)))

    def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        return self._wait(self.client.set_async(path, data, version))  # type: ignore[no-any-return]

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        if recursive:
            for child in self.children(path):
                self.delete(f"{path}/{child}", recursive=True)
        try:
            self._wait(self.client.delete_async(path, version))
        except NoNodeError:
            if version != -1:
                raise

    def ensure_path(self, path: str) -> None:
        with contextlib.suppress(NodeExistsError):
            self.create(path, makepath=True)

    def create_or_set(self, path: str, data: bytes) -> None:
        try:
            self.set(path, data)
        except NoNodeError:
            try:
                self.create(path, data, makepath=True)
            except NodeExistsError:
                self.set(path, data)

    def commit(self, ops: list[tuple[Any, ...]]) -> list[Any]:
        """Run ops atomically: ("create", path, data[, ephemeral, sequence]),
        ("set", path, data, version), ("delete", path, version), ("check", path, version).
        Raises ZkTransactionFailed naming the op that failed (kazoo returns the failures
        in a list); returns each op's result (a path for create, a stat for set)."""
        outcome = self.commit_many([ops])[0]
        if isinstance(outcome, ZkTransactionFailed):
            raise outcome
        return outcome

    def commit_many(self, transactions: list[list[tuple[Any, ...]]]
                    ) -> list[list[Any] | ZkTransactionFailed]:
        """Run independent transactions pipelined: all are sent before the first answer is
        awaited, so a thousand cost about one round trip, not a thousand. Each one's
        outcome is its results or the ZkTransactionFailed that says why nothing of it
        was applied; losing ZooKeeper raises ZkError."""
        pending = [self._transaction(ops).commit_async() for ops in transactions]
        outcomes: list[list[Any] | ZkTransactionFailed] = []
        for result in pending:
            results = self._wait(result)
            outcomes.append(_failure(results) or list(results))
        return outcomes

    async def commit_async(self, ops: list[tuple[Any, ...]], loop: asyncio.AbstractEventLoop
                           ) -> list[Any] | ZkTransactionFailed:
        """One transaction, as `commit_many` runs each, awaited on `loop` (no thread
        blocks)."""
        results = await self.run_async(self._transaction(ops).commit_async(), loop)
        return _failure(results) or list(results)

    def _transaction(self, ops: list[tuple[Any, ...]]) -> Any:
        tx = self.client.transaction()
        for op in ops:
            kind = op[0]
            if kind == "create":
                tx.create(op[1], op[2], ephemeral=bool(op[3]) if len(op) > 3 else False,
                          sequence=bool(op[4]) if len(op) > 4 else False)
            elif kind == "set":
                tx.set_data(op[1], op[2], op[3])
            elif kind == "delete":
                tx.delete(op[1], op[2])
            elif kind == "check":
                tx.check(op[1], op[2])
            else:
                raise ValueError(f"unknown transaction op {kind}")
        return tx

    def get_many(self, paths: list[str], watch: Callable[[WatchedEvent], None] | None = None
                 ) -> list[tuple[bytes, ZnodeStat] | None]:
        """Read many znodes at once (pipelined: one round trip's latency, not one each);
        None for the missing ones. Watches are left only on the ones that exist."""
        pending = [self.client.get_async(p, watch=watch) for p in paths]
        out: list[tuple[bytes, ZnodeStat] | None] = []
        for result in pending:
            try:
                data, stat = self._wait(result)
                out.append((bytes(data or b""), stat))
            except NoNodeError:
                out.append(None)
        return out

    def submit_gets(self, paths: list[str], watch: Callable[[WatchedEvent], None] | None
                    ) -> list[Any]:
        """getData requests for `paths`, queued with one wake of kazoo's connection
        thread; their kazoo async results, in order. kazoo wakes that thread once per
        request, and each wake hands it the GIL: a broker re-reading 10,000 watched
        partition states after a failover spent seconds doing so, holding up its own
        controller thread too."""
        client = self.client
        sock = getattr(client._connection, "_write_sock", None)
        if not paths or sock is None or client._state != KeeperState.CONNECTED:
            return [client.get_async(p, watch=watch) for p in paths]  # kazoo fails them
        results = []
        for path in paths:
            result = client.handler.async_result()
            client._queue.append((GetData(_prefix_root(client.chroot, path), watch), result))
            results.append(result)
        try:
            sock.sendall(b"\0" * len(paths))
        except OSError as e:  # closed meanwhile
            for result in results:
                result.set_exception(ZkError(f"ZooKeeper connection closed: {e}"))
        return results

    def wait_all(self, results: list[Any]) -> list[Any]:
        """Each kazoo async result's value, or the exception it ended with (a thread's
        wait: one hand-over to the event loop for a whole batch)."""
        out: list[Any] = []
        for result in results:
            try:
                out.append(result.get(timeout=self.op_timeout))
            except Exception as e:
                out.append(e)
        return out

    def read_many(self, paths: list[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """`get_many` without watches, in multiRead requests of READ_BATCH paths each
        (zk_multi_read.py); None for the missing ones. A ZooKeeper older than 3.6 has
        no multiRead: then the reads go one by one, pipelined."""
        if not self._multi_read:
            return self.get_many(paths)
        client = self.client
        pending = []
        for i in range(0, len(paths), READ_BATCH):
            result = client.handler.async_result()
            client._call(MultiRead([_prefix_root(client.chroot, p)
                                    for p in paths[i:i + READ_BATCH]]), result)
            pending.append(result)
        out: list[tuple[bytes, ZnodeStat] | None] = []
        try:
            for result in pending:
                for item in self._wait(result):
                    if isinstance(item, NoNodeError):
                        out.append(None)
                    elif isinstance(item, Exception):
                        raise ZkError(f"ZooKeeper read failed: {item!r}")
                    else:
                        out.append(item)
        except UnimplementedError:
            log.info("ZooKeeper has no multiRead (it is older than 3.6): reading one by one")
            self._multi_read = False
            return self.get_many(paths)
        return out

    # ---- from asyncio ----------------------------------------------------------------------

    def run_async(self, result: Any, loop: asyncio.AbstractEventLoop) -> asyncio.Future[Any]:
        """A kazoo IAsyncResult as an asyncio future on `loop` (no thread blocks)."""
        fut: asyncio.Future[Any] = loop.create_future()

        def settle(ar: Any) -> None:
            try:
                value = ar.get_nowait()
            except Exception as e:
                loop.call_soon_threadsafe(_set_exception, fut, e)
            else:
                loop.call_soon_threadsafe(_set_result, fut, value)

        result.rawlink(settle)
        return fut

    # ---- start-up helpers ----------------------------------------------------------------

    def create_top_level_paths(self) -> None:
        for path in zd.PERSISTENT_PATHS:
            self.ensure_path(path)

    def cluster_id(self, proposed: str) -> str:
        """The cluster's id from /cluster/id, created from `proposed` by the first broker."""
        found = self.get(zd.CLUSTER_ID)
        if found is None:
            try:
                self.create(zd.CLUSTER_ID, zd.encode_cluster_id(proposed), makepath=True)
                return proposed
            except NodeExistsError:
                found = self.get(zd.CLUSTER_ID)
                assert found is not None
        return zd.decode_cluster_id(found[0])


def _set_result(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)


def _set_exception(fut: asyncio.Future[Any], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)


def _connection_errors() -> tuple[type[BaseException], ...]:
    from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, SessionExpiredError
    from kazoo.handlers.threading import KazooTimeoutError

    return (ConnectionLoss, SessionExpiredError, ConnectionClosedError, KazooTimeoutError)


_CONNECTION_ERRORS = _connection_errors()
READ_BATCH = 1000  # paths per multiRead: ~200 KB of states, far below jute.maxbuffer
