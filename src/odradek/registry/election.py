"""Which registry instance is the leader: the group protocol with Confluent's "sr" type.

Every instance joins the group `schema-registry` (protocol type "sr", protocol "v0") with
its identity as member metadata; the group's leader picks the eligible member with the
lowest URL and hands every member the same assignment naming it, the JSON that
Confluent's and Karapace's registries exchange. Only the leader writes to `_schemas`, so
ids are assigned by one writer at a time; the others forward writes to its URL.

kafka-python's BaseCoordinator is the client: it exposes the protocol type, the member
metadata and the leader's assignment step, which librdkafka (consumer protocol only)
does not. It runs on kafka-python's own network thread, apart from the event loop.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

from kafka.coordinator.base import BaseCoordinator
from kafka.net.compat import KafkaNetClient

log = logging.getLogger(__name__)


class _SchemaRegistryCoordinator(BaseCoordinator):  # type: ignore[misc]
    def __init__(self, election: LeaderElection, client: Any, **configs: Any) -> None:
        self._election = election
        super().__init__(client, **configs)

    def protocol_type(self) -> str:
        return "sr"

    def group_protocols(self) -> list[tuple[str, bytes]]:
        return [("v0", json.dumps(self._election.identity).encode())]

    def _perform_assignment(self, leader_id: str, protocol: str,
                            members: list[Any]) -> dict[str, bytes]:
        identities = {}
        for m in members:
            try:
                identities[m.member_id] = json.loads(m.metadata)
            except ValueError:
                log.warning("member %s of the registry group sent unreadable metadata",
                            m.member_id)
        eligible = {k: v for k, v in identities.items() if v.get("master_eligibility", True)}
        urls = [_url(v) for v in identities.values()]
        error = 1 if len(urls) != len(set(urls)) else 0  # Confluent's DUPLICATE_URLS
        assignment: dict[str, Any] = {"version": 1, "error": error}
        if eligible and not error:
            chosen = min(eligible, key=lambda k: _url(eligible[k]))
            assignment.update(master=chosen, master_identity=eligible[chosen])
        else:
            assignment.update(master=None, master_identity=None)
        raw = json.dumps(assignment).encode()
        return {k: raw for k in identities}

    async def _on_join_prepare_async(self, generation: int, member_id: str,
                                     timeout_ms: int | None = None) -> None:
        self._election._set(None, None)

    async def _on_join_complete_async(self, generation: int, member_id: str, protocol: str,
                                      member_assignment_bytes: bytes) -> None:
        try:
            assignment = json.loads(member_assignment_bytes)
        except ValueError:
            assignment = {}
        if assignment.get("error"):
            log.error("registry group: two instances advertise the same URL %s",
                      self._election.url)
        identity = assignment.get("master_identity")
        self._election._set(_url(identity) if identity else None,
                            assignment.get("master") == member_id)


def _url(identity: dict[str, Any]) -> str:
    return f"{identity.get('scheme', 'http')}://{identity.get('host')}:{identity.get('port')}"


class LeaderElection:
    def __init__(self, bootstrap: str, url: str, group_id: str = "schema-registry",
                 eligible: bool = True, session_timeout_ms: int = 10000,
                 client_config: dict[str, Any] | None = None) -> None:
        scheme, _, hostport = url.partition("://")
        host, _, port = hostport.rstrip("/").rpartition(":")
        self.url = url.rstrip("/")
        self.identity = {"version": 1, "host": host, "port": int(port), "scheme": scheme,
                         "master_eligibility": eligible}
        self._bootstrap = bootstrap
        self._group_id = group_id
        self._session_timeout_ms = session_timeout_ms
        self._client_config = client_config or {}
        self._lock = threading.Lock()
        self._leader_url: str | None = None
        self._is_leader = False
        self._changed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def leader_url(self) -> str | None:
        with self._lock:
            return self._leader_url

    @property
    def is_leader(self) -> bool:
        with self._lock:
            return self._is_leader

    def _set(self, leader_url: str | None, is_leader: bool | None) -> None:
        with self._lock:
            if leader_url != self._leader_url:
                log.info("registry leader: %s%s", leader_url,
                         " (this instance)" if is_leader else "")
            self._leader_url, self._is_leader = leader_url, bool(is_leader)
            self._changed.notify_all()

    def wait_for_leader(self, timeout: float) -> str | None:
        with self._changed:
            self._changed.wait_for(lambda: self._leader_url is not None or self._stop.is_set(),
                                   timeout)
            return self._leader_url

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="registry-election",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._changed:
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(15)

    def _run(self) -> None:
        client = KafkaNetClient(bootstrap_servers=self._bootstrap,
                                client_id=f"odradek-registry-{self.url}",
                                **self._client_config)
        client._net.start()
        coordinator = None
        try:
            while coordinator is None and not self._stop.is_set():
                try:
                    client._manager.bootstrap(5000)
                    coordinator = _SchemaRegistryCoordinator(
                        self, client, group_id=self._group_id,
                        session_timeout_ms=self._session_timeout_ms,
                        heartbeat_interval_ms=max(100, self._session_timeout_ms // 10),
                        max_poll_interval_ms=300000,
                        api_version=client._manager.broker_version)
                except Exception as e:
                    log.warning("registry election cannot reach the brokers yet: %s", e)
                    self._stop.wait(1.0)
            while coordinator is not None and not self._stop.is_set():
                try:
                    coordinator.ensure_active_group(timeout_ms=1000)
                    coordinator.poll_heartbeat()
                except Exception as e:
                    log.warning("registry election: %s", e)
                    self._set(None, False)
                    self._stop.wait(0.5)
                self._stop.wait(0.1)
        finally:
            self._set(None, False)
            if coordinator is not None:
                try:
                    coordinator.close(timeout_ms=5000)
                except Exception as e:
                    log.debug("leaving the registry group: %s", e)
            client.close()
            client._net.stop()
