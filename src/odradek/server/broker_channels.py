"""Connections from this broker to the others, for its own calls (markers, share state,
transaction partitions): one channel per broker over the inter-broker listener, with its
security, and one request in flight on each (the channel's rule).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from odradek.replication.channel import BrokerChannel

if TYPE_CHECKING:
    from odradek.server.core import BrokerCore


class BrokerChannels:
    def __init__(self, broker: BrokerCore, client_id: str, timeout_s: float) -> None:
        self.broker = broker
        self.client_id = f"{client_id}-{broker.node_id}"
        self.timeout_s = timeout_s
        self._channels: dict[int, tuple[BrokerChannel, asyncio.Lock]] = {}

    def get(self, broker_id: int) -> tuple[BrokerChannel, asyncio.Lock] | None:
        """The channel to a live broker and the lock that keeps one call on it at a
        time; None when the broker is unknown, fenced or has no listener."""
        info = self.broker.controller.image.brokers.get(broker_id)
        if info is None or info.fenced or not info.listeners:
            return None
        security = self.broker.inter_broker
        host, port = info.endpoint(security.listener)
        entry = self._channels.get(broker_id)
        if entry is not None and (entry[0].host, entry[0].port) != (host, port):
            entry[0].close()  # the broker restarted on a new address
            entry = None
        if entry is None:
            entry = self._channels[broker_id] = (
                BrokerChannel(host, port, self.client_id, self.timeout_s, security=security),
                asyncio.Lock())
        return entry

    def close(self) -> None:
        for channel, _ in self._channels.values():
            channel.close()
        self._channels.clear()
