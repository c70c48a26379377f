"""A broker's membership of a ZooKeeper cluster (`zookeeper.connect` set).

Start-up, in the order Kafka's KafkaServer does it: connect (bounded by
`zookeeper.connection.timeout.ms`), create the top-level znodes, agree on the cluster
id — /cluster/id is the cluster's; the log manager then refuses a data dir whose
meta.properties names another cluster, as Kafka's InconsistentClusterIdException —
and read the whole image, all before the logs are loaded (their configs come from
it). Registration under /brokers/ids and standing for controller come later, once
the listeners are bound and the advertised ports are known.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from odradek.cluster.metadata import BrokerInfo
from odradek.cluster.zk_client import ZkError, ZkSession
from odradek.cluster.zk_store import ZkMetadataStore

log = logging.getLogger(__name__)


def session_from_config(config: Mapping[str, Any]) -> ZkSession:
    session_ms = int(config["zookeeper.session.timeout.ms"])
    connection_ms = config.get("zookeeper.connection.timeout.ms") or session_ms
    return ZkSession(str(config["zookeeper.connect"]), session_timeout_ms=session_ms,
                     connection_timeout_ms=int(connection_ms))


async def open_store(config: Mapping[str, Any], node_id: int, proposed_cluster_id: str,
                     broker_defaults: Callable[[], Mapping[str, Any]]) -> ZkMetadataStore:
    """Connect and read the image; the store is not registered yet."""
    session = session_from_config(config)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, session.start)
    # registered later with the bound ports; this placeholder is never written
    store = ZkMetadataStore(session, local_broker=BrokerInfo(node_id, "", -1),
                            broker_defaults=broker_defaults)
    try:
        await store.start(proposed_cluster_id)
    except ZkError:
        store.stop()
        session.stop()
        raise
    log.info("joined ZooKeeper at %s: cluster %s, %d brokers, %d topics",
             session.hosts, store.image.cluster_id, len(store.image.brokers),
             len(store.image.topics))
    return store


async def register(store: ZkMetadataStore, me: BrokerInfo,
                   protocols: Mapping[str, str] | None = None) -> None:
    """Register under /brokers/ids/<id> with the bound endpoints of every listener and
    their protocols (Kafka's listener_security_protocol_map: the other brokers find
    our inter-broker endpoint there), then stand for controller."""
    store.local_broker = me
    store.security_protocols = dict(protocols or {})
    await store.register()
    store.start_controller()


async def leave(store: ZkMetadataStore) -> None:
    """Resign and close the session: the registration and /controller go at once, so the
    controller moves our leaderships now rather than after the session timeout."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, store.stop)  # joins the controller thread
    await loop.run_in_executor(None, store.session.stop)
