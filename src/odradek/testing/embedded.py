"""`EmbeddedBroker`: a real odradek broker inside the test's process (its own thread and
event loop) or, with `process=True`, as a child process.

    with EmbeddedBroker({"num.partitions": 3}) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        broker.faults.fail("Produce", "NOT_LEADER_OR_FOLLOWER")

The broker listens on a free loopback port and keeps its data in a temporary
directory removed at `stop()` (or in `data_dir=`, kept). `restart()` keeps both.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import errno
import inspect
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from odradek.testing.config import TestkitError, broker_properties, temp_root
from odradek.testing.faults import Faults

if TYPE_CHECKING:
    from odradek.server.broker import Broker
    from odradek.testing.child import ChildBroker, RemoteFaults

__all__ = ["EmbeddedBroker"]

log = logging.getLogger(__name__)
T = TypeVar("T")
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0

ConfigValue = str | int | float | bool
# Started and not stopped yet; held strongly, so a broker a test forgot is still found.
_live: set[EmbeddedBroker] = set()


def running_brokers() -> list[EmbeddedBroker]:
    """Test brokers started and not stopped yet (the pytest plugin checks at the end)."""
    return [b for b in list(_live) if b.running]


@atexit.register
def _stop_leftovers() -> None:
    for broker in running_brokers():
        with contextlib.suppress(Exception):
            broker.stop()


class _RiskySettingsFilter(logging.Filter):
    """A test broker's data is temporary on purpose: no warning about /tmp in every test."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.msg == "risky setting: %s"
                    and threading.current_thread().name.startswith("odradek-broker"))


logging.getLogger("odradek.server.broker").addFilter(_RiskySettingsFilter())


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop  # as `odradek broker` runs: see cli/broker.py
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class EmbeddedBroker:
    """A real broker for tests. Context manager, or `start()` and `stop()`."""

    def __init__(self, config: Mapping[str, ConfigValue] | None = None, *,
                 data_dir: str | Path | None = None, port: int = 0, host: str = "127.0.0.1",
                 process: bool = False, node_id: int | None = None,
                 defaults: Mapping[str, str] | None = None) -> None:
        props = (broker_properties(config) if defaults is None
                 else broker_properties(config, defaults))
        if node_id is not None:
            props["node.id"] = str(node_id)
        self.properties = props
        self.host = host
        self.port = port
        self.process = process
        self.data_dir: Path | None = Path(data_dir) if data_dir is not None else None
        self._root: Path | None = None  # the temporary directory we made and remove
        self._faults = Faults(int(props.get("node.id", "1")))
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._child: ChildBroker | None = None
        self.broker: Broker | None = None  # the Broker object (in-process only)
        self.errors: list[str] = []  # unexpected exceptions on the broker's loop
        self.crash: str | None = None  # why the broker's loop died, if it did
        self.started_in = ""  # the test that started it (for the plugin's leak report)

    # ---- lifecycle ------------------------------------------------------------------

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        if self._child is not None:
            return self._child.running
        return self._thread is not None and self._thread.is_alive()

    @property
    def bootstrap_servers(self) -> str:
        if not self.running:
            raise TestkitError("the broker is not running: call start() first")
        return f"{self.host}:{self.port}"

    @property
    def node_id(self) -> int:
        return int(self.properties.get("node.id", "1"))

    def start(self, timeout: float = START_TIMEOUT) -> EmbeddedBroker:
        if self.running:
            raise TestkitError(f"the broker on {self.host}:{self.port} is already running")
        if self.data_dir is None:
            self._root = Path(tempfile.mkdtemp(prefix="odradek-test-", dir=temp_root()))
            self.data_dir = self._root / "data"
        props = {**self.properties, "listeners": f"PLAINTEXT://{self.host}:{self.port}",
                 "log.dirs": str(self.data_dir)}
        try:
            if self.process:
                from odradek.testing.child import ChildBroker

                log_path = (self._root / "broker.log" if self._root is not None
                            else self.data_dir.with_name(self.data_dir.name + ".log"))
                self._child = ChildBroker(props, self.data_dir, log_path)
                self.port = self._child.start(timeout)
            else:
                self._start_thread(props, timeout)
        except BaseException:
            self._remove_own_dir()
            raise
        self.started_in = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
        _live.add(self)
        return self

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the broker (idempotent) and remove its data unless `data_dir` was given."""
        try:
            self._stop_broker(timeout)
        finally:
            _live.discard(self)
            self._remove_own_dir()

    def restart(self, timeout: float = START_TIMEOUT) -> EmbeddedBroker:
        """A clean stop and a start with the same data and port."""
        self._stop_broker(STOP_TIMEOUT)
        return self.start(timeout)

    def _stop_broker(self, timeout: float) -> None:
        if self._child is not None:
            child, self._child = self._child, None
            child.stop(timeout)
            return
        thread, loop, event = self._thread, self._loop, self._stop_event
        if thread is None or loop is None:
            return
        if thread.is_alive() and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop already closed
                loop.call_soon_threadsafe(event.set)
        thread.join(timeout)
        if thread.is_alive():
            raise TestkitError(f"the broker on {self.host}:{self.port} did not stop "
                               f"within {timeout}s")
        self._thread = self._loop = self._stop_event = None
        self.broker = None
        if self.crash is not None:
            crash, self.crash = self.crash, None
            raise TestkitError(f"the broker on {self.host}:{self.port} crashed: {crash}")

    def _remove_own_dir(self) -> None:
        if self._root is not None and not self.running:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = self.data_dir = None

    # ---- the broker's thread ---------------------------------------------------------

    def _start_thread(self, props: dict[str, str], timeout: float) -> None:
        from odradek.server.config import BrokerConfig

        config = BrokerConfig.load(None, props, environ={})
        loop = _new_loop()
        loop.set_exception_handler(self._on_loop_error)
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        thread = threading.Thread(target=self._serve, args=(loop, config, ready),
                                  name=f"odradek-broker-{self.node_id}", daemon=True)
        self._loop, self._thread = loop, thread
        thread.start()
        try:
            ready.result(timeout)
        except concurrent.futures.TimeoutError:
            self._stop_broker(STOP_TIMEOUT)
            raise TestkitError(f"the broker did not start within {timeout}s") from None
        except BaseException as e:
            thread.join(STOP_TIMEOUT)  # it closes its loop and executor threads first
            self._thread = self._loop = None
            raise self._start_error(e) from None

    def _start_error(self, e: BaseException) -> BaseException:
        if isinstance(e, OSError):
            if e.errno == errno.EADDRINUSE:
                return TestkitError(f"cannot start the broker: {self.host}:{self.port} is "
                                    "already in use")
            return TestkitError(f"cannot start the broker: {e}")
        if isinstance(e, Exception):
            return TestkitError(f"cannot start the broker: {type(e).__name__}: {e}")
        return e  # KeyboardInterrupt and the like stay what they are

    def _serve(self, loop: asyncio.AbstractEventLoop, config: Any,
               ready: concurrent.futures.Future[None]) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main(config, ready))
        except BaseException as e:  # the broker died: stop() says so, in one line
            self.crash = f"{type(e).__name__}: {e}"
            if not ready.done():
                ready.set_exception(e)
            broker = self.broker
            if broker is not None:  # close its listeners and files all the same
                with contextlib.suppress(BaseException):
                    loop.run_until_complete(broker.stop())
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    async def _main(self, config: Any, ready: concurrent.futures.Future[None]) -> None:
        from odradek.server.broker import Broker
        from odradek.server.run import refuse_unhosted
        from odradek.testing.fault_step import FaultStep

        self._stop_event = asyncio.Event()

        broker = Broker(config)
        try:
            refuse_unhosted(config, ())
            await broker.start()
        except BaseException as e:
            with contextlib.suppress(Exception):
                await broker.stop()
            ready.set_exception(e)
            return
        broker.pipeline.faults = FaultStep(self._faults)
        self.broker = broker
        self.port = broker.bound["PLAINTEXT"][1]
        ready.set_result(None)
        try:
            await self._stop_event.wait()
        finally:
            await broker.stop()

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        self.errors.append(f"{context.get('message')}: {exc!r}" if exc else
                           str(context.get("message")))
        loop.default_exception_handler(context)

    def call(self, fn: Callable[[Broker], Any], timeout: float = 30.0) -> Any:
        """Run `fn(broker)` on the broker's loop (in-process), awaiting what it returns
        if it is awaitable, and return the result."""
        loop, broker = self._loop, self.broker
        if loop is None or broker is None or not self.running:
            raise TestkitError("the broker is not running")

        async def run() -> Any:
            result = fn(broker)
            if inspect.isawaitable(result):
                return await result
            return result

        return self._await(run(), timeout)

    def _await(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # ---- what tests use ---------------------------------------------------------------

    @property
    def faults(self) -> Faults | RemoteFaults:
        """Injected faults: `fail`, `delay`, `disconnect`, `clear` (testing/faults.py)."""
        if self._child is not None:
            return self._child.faults
        return self._faults

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: Mapping[str, ConfigValue] | None = None) -> None:
        """Create a topic; its partitions are ready when this returns."""
        configs = {k: str(v) for k, v in (config or {}).items()}
        if self._child is not None:
            self._child.request("create_topic", name=name, partitions=partitions,
                                replication_factor=replication_factor, config=configs)
            return
        self.call(lambda b: b.controller.create_topic(name, partitions, replication_factor,
                                                      configs=configs))

    def delete_topic(self, name: str) -> None:
        if self._child is not None:
            self._child.request("delete_topic", name=name)
            return
        self.call(lambda b: b.controller.delete_topic(name))

    def __repr__(self) -> str:
        state = f"on {self.host}:{self.port}" if self.running else "stopped"
        return f"<EmbeddedBroker {self.node_id} {state}>"
