"""The registry hosted in a broker's process (`schema.registry.listeners`, as Redpanda's
schema_registry): a client of its own broker, on a thread of its own.

Its own thread and event loop, not the broker's: a registration parses the schema and
checks compatibility in Python (milliseconds of CPU for a large Avro or Protobuf
schema), and the store's waits on librdkafka run in worker threads; on the broker's loop
both would sit between produce and fetch requests. bench/registry_hosted.py measures
produce latency with and without registrations running beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any

from odradek.registry.server import RegistryConfig, SchemaRegistry

log = logging.getLogger(__name__)


class HostedRegistry:
    """`await start(bootstrap)` once the broker listens; `await stop()` before it stops."""

    def __init__(self, listeners: str, **config: Any) -> None:
        self.listeners = listeners
        self.config = config
        self.registry: SchemaRegistry | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return self.registry.url if self.registry is not None else ""

    async def start(self, bootstrap: str) -> None:
        started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        host_loop = asyncio.get_running_loop()
        config = RegistryConfig(bootstrap_servers=bootstrap, listeners=self.listeners,
                                **self.config)

        def report(error: BaseException | None) -> None:
            if started.done():
                return
            if error is None:
                started.set_result(None)
            else:
                started.set_exception(error)

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve(config, host_loop, report))
            except BaseException as e:  # reported to start(); the thread just ends
                host_loop.call_soon_threadsafe(report, e)
            finally:
                loop.close()

        self._thread = threading.Thread(target=run, name="schema-registry", daemon=True)
        self._thread.start()
        await started
        log.info("schema registry hosted on %s, a client of %s", self.url, bootstrap)

    async def _serve(self, config: RegistryConfig, host_loop: asyncio.AbstractEventLoop,
                     report: Any) -> None:
        self._stopped = asyncio.Event()
        self.registry = SchemaRegistry(config)
        await self.registry.start()
        host_loop.call_soon_threadsafe(report, None)
        try:
            await self._stopped.wait()
        finally:
            await self.registry.stop()

    async def stop(self) -> None:
        loop, stopped, thread = self._loop, self._stopped, self._thread
        if loop is not None and stopped is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                loop.call_soon_threadsafe(stopped.set)
        if thread is not None:
            await asyncio.to_thread(thread.join, 30)
