"""A broker process's life around its Broker: the hosted client apps, the signals, a stop
during a long start-up."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from odradek.configdef import ConfigError
from odradek.server.broker import Broker
from odradek.server.config import BrokerConfig
from odradek.server.heap import keep_freed_memory
from odradek.storage.log_dir_scan import StartupAborted

log = logging.getLogger(__name__)


class HostedService(Protocol):
    """A client app a composition root runs in the broker's process (the schema registry,
    `schema.registry.listeners`): started once the broker listens, stopped before it."""

    async def start(self, bootstrap: str) -> None: ...

    async def stop(self) -> None: ...


def refuse_unhosted(config: BrokerConfig, hosted: Sequence[HostedService]) -> None:
    """server/ hosts no client app itself: a composition root that does not bring the
    registry must not let `schema.registry.listeners` pass as if it were served."""
    if config["schema.registry.listeners"] and not hosted:
        raise ConfigError("schema.registry.listeners: this process hosts no schema registry "
                          "(`odradek broker` does; or run `odradek schema-registry`)")


async def run_broker(config: BrokerConfig, ready: Callable[[Broker], None] | None = None,
                     stop: asyncio.Event | None = None,
                     hosted: Sequence[HostedService] = ()) -> None:
    """Run a broker until `stop` is set or SIGINT/SIGTERM arrives."""
    import signal

    refuse_unhosted(config, hosted)
    keep_freed_memory()  # this process is the broker's: its heap serves requests
    broker = Broker(config)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    # Before the start: a SIGTERM during a long start-up (thousands of partitions to
    # load) stops the broker at once, not once it has finished starting.
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    starting = asyncio.ensure_future(broker.start())
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((starting, stopped), return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            log.info("stop requested during start-up: stopping")
            broker.abort_start()
            starting.cancel()
            with contextlib.suppress(asyncio.CancelledError, StartupAborted):
                await starting
            return
        starting.result()  # a failed start raises here
        for service in hosted:
            await service.start(broker.plaintext_bootstrap())
        if ready is not None:
            ready(broker)
        await stopped
    finally:
        stopped.cancel()
        for service in reversed(hosted):
            await service.stop()
        await broker.stop()

