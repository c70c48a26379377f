"""One registry instance: the store, the election and the HTTP listener, started and
stopped together. `SchemaRegistry` is what a host (the broker, `odradek up`, a test)
embeds; `serve()` runs one until it is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import uvicorn

from odradek.registry import acls
from odradek.registry.api import create_app
from odradek.registry.auth import basic_auth, load_password_file
from odradek.registry.election import LeaderElection
from odradek.registry.service import RegistryService
from odradek.registry.store import KafkaStore

log = logging.getLogger(__name__)


@dataclass
class RegistryConfig:
    """Confluent's property names where one exists (`kafkastore.topic`, `listeners`...)."""

    bootstrap_servers: str
    listeners: str = "http://0.0.0.0:8081"
    advertised_url: str | None = None  # what other instances forward writes to
    topic: str = "_schemas"  # kafkastore.topic
    group_id: str = "schema-registry"  # schema.registry.group.id
    leader_eligibility: bool = True  # leader.eligibility
    compatibility: str = "BACKWARD"  # schema.compatibility.level
    topic_replication_factor: int = 3  # kafkastore.topic.replication.factor
    # create the topic only once that many brokers are up (a broker-hosted registry)
    wait_for_replicas: bool = False
    timeout_s: float = 30.0  # kafkastore.timeout.ms
    max_request_bytes: int = 8 << 20
    max_schema_bytes: int = 1 << 20
    # authentication.method=BASIC with this password file (`user: password[,role...]`)
    basic_auth_file: Path | None = None
    # Redpanda's schema_registry_enable_authorization: ACLs on subjects and the registry,
    # kept in `acl_topic` (Confluent's confluent.schema.registry.acl.topic, by default
    # kafkastore.topic + "_acl"); needs basic auth, for the user's name
    enable_authorization: bool = False
    acl_topic: str | None = None
    super_users: frozenset[str] = frozenset()  # User:name, as the broker's super.users
    client_config: dict[str, Any] = field(default_factory=dict)


def acl_topic(config: RegistryConfig) -> str:
    return config.acl_topic or f"{config.topic}_acl"


class SchemaRegistry:
    def __init__(self, config: RegistryConfig) -> None:
        self.config = config
        self.max_request_bytes = config.max_request_bytes
        self.store = KafkaStore(config.bootstrap_servers, config.topic,
                                config.topic_replication_factor, config.client_config,
                                config.timeout_s, config.wait_for_replicas)
        self.service = RegistryService(self.store, config.compatibility.upper(),
                                       config.max_schema_bytes)
        self.acl_store: KafkaStore | None = None
        self.authorizer: acls.RegistryAuthorizer | None = None
        if config.enable_authorization:
            if config.basic_auth_file is None:
                raise ValueError("schema registry authorization needs basic authentication "
                                 "(a password file): ACLs name its users")
            self.acl_store = KafkaStore(config.bootstrap_servers, acl_topic(config),
                                        config.topic_replication_factor,
                                        config.client_config, config.timeout_s,
                                        config.wait_for_replicas, state=acls.AclState(),
                                        decode=acls.decode)
            self.authorizer = acls.RegistryAuthorizer(self.acl_store.state,
                                                      config.super_users)
        self._election: LeaderElection | None = None
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None
        self._forwarder: httpx.AsyncClient | None = None
        self.url = ""

    @property
    def is_leader(self) -> bool:
        return self._election is not None and self._election.is_leader

    async def leader_url(self, timeout: float) -> str | None:
        assert self._election is not None
        return await asyncio.to_thread(self._election.wait_for_leader, timeout)

    @property
    def forwarder(self) -> httpx.AsyncClient:
        assert self._forwarder is not None
        return self._forwarder

    async def start(self) -> None:
        listener = urlparse(self.config.listeners.split(",")[0].strip())
        if listener.scheme != "http":
            raise ValueError(f"listeners: only http:// is supported, not {listener.scheme}")
        host, port = listener.hostname or "0.0.0.0", listener.port or 8081
        app = create_app(self)
        if self.config.basic_auth_file is not None:
            app = basic_auth(app, load_password_file(self.config.basic_auth_file))
        # bound here, before anything else starts: a port in use is one clear OSError
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as e:
            sock.close()
            raise OSError(e.errno, f"cannot listen on {host}:{port}: {e.strerror}") from e
        try:
            await self._start_serving(app, sock, host)
        except BaseException:
            sock.close()
            await self.stop()
            raise

    async def _start_serving(self, app: Any, sock: socket.socket, host: str) -> None:
        await self.store.start()
        if self.acl_store is not None:
            await self.acl_store.start()
        self._forwarder = httpx.AsyncClient(timeout=self.config.timeout_s)
        uv = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        self._server = _HostedServer(uv)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError("the registry's HTTP listener stopped at start")
            await asyncio.sleep(0.01)
        bound = sock.getsockname()[1]
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else host
        self.url = self.config.advertised_url or f"http://{shown}:{bound}"
        self._election = LeaderElection(self.config.bootstrap_servers, self.url,
                                        self.config.group_id,
                                        self.config.leader_eligibility,
                                        client_config=_kafka_python_config(
                                            self.config.client_config))
        self._election.start()
        log.info("schema registry listening on %s", self.url)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception):
                await self._task
        if self._election is not None:
            await asyncio.to_thread(self._election.stop)
        if self._forwarder is not None:
            await self._forwarder.aclose()
        await self.store.stop()
        if self.acl_store is not None:
            await self.acl_store.stop()

    async def __aenter__(self) -> SchemaRegistry:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


class _HostedServer(uvicorn.Server):
    """uvicorn without its signal capture: the host process owns SIGINT and SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _kafka_python_config(librdkafka: dict[str, Any]) -> dict[str, Any]:
    """The few security settings both clients share, in kafka-python's spelling."""
    names = {"security.protocol": "security_protocol", "sasl.mechanism": "sasl_mechanism",
             "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password",
             "ssl.ca.location": "ssl_cafile"}
    return {names[k]: v for k, v in librdkafka.items() if k in names}


async def serve(config: RegistryConfig, ready: asyncio.Event | None = None) -> None:
    """Run a registry until cancelled; `ready` is set once it answers requests."""
    registry = SchemaRegistry(config)
    await registry.start()
    try:
        if ready is not None:
            ready.set()
        await asyncio.Event().wait()
    finally:
        await registry.stop()
